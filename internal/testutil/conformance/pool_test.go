package conformance_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil/conformance"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// sdkListing is what a plain go-sdk client lists on url: the names of the
// tools and prompts and the URIs of the resources and templates.
type sdkListing struct {
	Tools, Prompts, Resources, Templates []string
}

func mustListWithSDK(t *testing.T, url string) sdkListing {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "conformance-test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("go-sdk Connect() err = %v", err)
	}
	defer cs.Close()
	var l sdkListing
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("go-sdk tools/list: %v", err)
		}
		l.Tools = append(l.Tools, tool.Name)
	}
	for p, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatalf("go-sdk prompts/list: %v", err)
		}
		l.Prompts = append(l.Prompts, p.Name)
	}
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatalf("go-sdk resources/list: %v", err)
		}
		l.Resources = append(l.Resources, r.URI)
	}
	for r, err := range cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatalf("go-sdk resources/templates/list: %v", err)
		}
		l.Templates = append(l.Templates, r.URITemplate)
	}
	return l
}

// rawField reads one string member from each raw definition.
func rawField(t *testing.T, raws []json.RawMessage, field string) []string {
	t.Helper()
	var out []string
	for _, raw := range raws {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		s, _ := m[field].(string)
		out = append(out, s)
	}
	return out
}

// TestReference_PoolDiscovers discovers the reference server through the
// upstream pool, for each protocol generation, and finds exactly what a
// plain go-sdk client lists there (tools, prompts, resources, templates);
// then calls its tools: text relayed, the server's error as isError, the
// server's progress relayed to the caller.
func TestReference_PoolDiscovers(t *testing.T) {
	for _, g := range generations {
		t.Run(g.spec, func(t *testing.T) {
			url := conformance.StartReference(t, g.opts)
			want := mustListWithSDK(t, url)
			if len(want.Tools) == 0 || len(want.Prompts) == 0 || len(want.Resources) == 0 || len(want.Templates) == 0 {
				t.Fatalf("the reference server lists %+v; want some of each", want)
			}
			p := upstream.New[string](upstream.Options{Network: upstream.Network{Private: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
			t.Cleanup(func() { _ = p.Close() })
			target := upstream.Target{URL: url}
			c, err := p.Discover(context.Background(), target)
			if err != nil {
				t.Fatalf("Discover() err = %v", err)
			}
			t.Logf("protocol %s: %d tools, %d prompts, %d resources, %d templates", c.ProtocolVersion, len(c.Tools), len(c.Prompts), len(c.Resources), len(c.ResourceTemplates))
			if c.ProtocolVersion != g.spec {
				t.Errorf("Discover() negotiated %s, want %s", c.ProtocolVersion, g.spec)
			}
			if len(c.Invalid) > 0 {
				t.Errorf("Discover() refused %+v", c.Invalid)
			}
			got := sdkListing{
				Prompts:   rawField(t, c.Prompts, "name"),
				Resources: rawField(t, c.Resources, "uri"),
				Templates: rawField(t, c.ResourceTemplates, "uriTemplate"),
			}
			for _, tool := range c.Tools {
				got.Tools = append(got.Tools, tool.Name)
			}
			sort := func(l sdkListing) sdkListing {
				for _, s := range [][]string{l.Tools, l.Prompts, l.Resources, l.Templates} {
					slices.Sort(s)
				}
				return l
			}
			if diff := cmp.Diff(sort(want), sort(got)); diff != "" {
				t.Errorf("Discover() lists differ from go-sdk's (-sdk +pool):\n%s", diff)
			}

			call := func(tool string, onProgress func(upstream.Progress)) *upstream.CallResult {
				t.Helper()
				res, err := p.Call(context.Background(), "ws/reference", target, upstream.CallRequest{Tool: tool, Arguments: json.RawMessage(`{}`), OnProgress: onProgress})
				if err != nil {
					t.Fatalf("Call(%s) err = %v", tool, err)
				}
				return res
			}
			if res := call("test_simple_text", nil); res.IsError || !strings.Contains(string(res.Raw), `"type":"text"`) {
				t.Errorf("test_simple_text = %s", res.Raw)
			}
			if res := call("test_error_handling", nil); !res.IsError {
				t.Errorf("test_error_handling = %s, want isError", res.Raw)
			}
			var mu sync.Mutex
			var progress []upstream.Progress
			call("test_tool_with_progress", func(pr upstream.Progress) {
				mu.Lock()
				defer mu.Unlock()
				progress = append(progress, pr)
			})
			mu.Lock()
			defer mu.Unlock()
			if len(progress) != 3 || progress[2].Progress != 100 || progress[2].Total != 100 {
				t.Errorf("progress relayed = %+v, want the server's 0, 50, 100 of 100", progress)
			}
		})
	}
}
