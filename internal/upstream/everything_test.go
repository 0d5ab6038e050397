package upstream

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/upstream/upstreamtest"
)

// startEverything runs the official MCP reference server, pinned by
// testdata/everything/package-lock.json (upstreamtest.Everything).
func startEverything(t *testing.T) string {
	t.Helper()
	return upstreamtest.Everything(t, filepath.Join("testdata", "everything"))
}

// TestEverythingServer discovers the official reference server and calls
// its tools through the pool: declared annotations, every capability's
// list, text, image, embedded resource and structured results relayed
// raw, progress relayed, and the server's validation error as isError.
func TestEverythingServer(t *testing.T) {
	url := startEverything(t)
	p := newPool(t, Options{})
	target := Target{URL: url}
	c, err := p.Discover(context.Background(), target)
	if err != nil {
		t.Fatalf("Discover() err = %v", err)
	}
	tools := map[string]Tool{}
	for _, tool := range c.Tools {
		tools[tool.Name] = tool
	}
	echo, ok := tools["echo"]
	if !ok {
		t.Fatalf("no echo tool among %d tools", len(c.Tools))
	}
	if a := echo.Annotations; a.ReadOnly == nil || !*a.ReadOnly || a.Destructive == nil || *a.Destructive || a.OpenWorld == nil || *a.OpenWorld {
		t.Errorf("echo annotations = %s, want all declared (read-only, not destructive, closed world)", a.Raw)
	}
	if echo.Title != "Echo Tool" {
		t.Errorf("echo title = %q", echo.Title)
	}
	if len(c.Prompts) == 0 || len(c.Resources) == 0 || len(c.ResourceTemplates) == 0 {
		t.Errorf("prompts %d, resources %d, templates %d; want some of each", len(c.Prompts), len(c.Resources), len(c.ResourceTemplates))
	}
	if _, err := Pin(echo); err != nil {
		t.Errorf("Pin(echo) err = %v", err)
	}

	call := func(tool, args string, extra ...func(*CallRequest)) map[string]json.RawMessage {
		t.Helper()
		req := CallRequest{Tool: tool, Arguments: json.RawMessage(args)}
		for _, f := range extra {
			f(&req)
		}
		res, err := p.Call(context.Background(), "ws/everything", target, req)
		if err != nil {
			t.Fatalf("Call(%s) err = %v", tool, err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(res.Raw, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := call("echo", `{"message":"hi"}`); !strings.Contains(string(m["content"]), "hi") {
		t.Errorf("echo content = %s", m["content"])
	}
	if m := call("get-tiny-image", `{}`); !strings.Contains(string(m["content"]), `"type":"image"`) || !strings.Contains(string(m["content"]), "iVBORw0KGgo") {
		t.Errorf("image content = %.200s", m["content"])
	}
	if m := call("get-resource-reference", `{"resourceType":"Text","resourceId":1}`); !strings.Contains(string(m["content"]), `"type":"resource"`) {
		t.Errorf("resource content = %.300s", m["content"])
	}
	if m := call("get-structured-content", `{"location":"Chicago"}`); m["structuredContent"] == nil || !strings.Contains(string(m["structuredContent"]), "temperature") {
		t.Errorf("structured result = %v", m)
	}
	if m := call("echo", `{"message":42}`); string(m["isError"]) != "true" {
		t.Errorf("invalid arguments = %v, want an isError result", m)
	}
	var mu sync.Mutex
	var progress []Progress
	call("trigger-long-running-operation", `{"duration":1,"steps":3}`, func(r *CallRequest) {
		r.OnProgress = func(pr Progress) {
			mu.Lock()
			progress = append(progress, pr)
			mu.Unlock()
		}
	})
	mu.Lock()
	defer mu.Unlock()
	if len(progress) < 2 {
		t.Errorf("progress relayed = %v, want the server's steps", progress)
	}
}
