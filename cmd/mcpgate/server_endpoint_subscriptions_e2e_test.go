package main

// End to end: a server's own endpoint pushes its prompts list changes that
// a discovery found, and holds resource subscriptions on the upstream for
// the person who subscribed, on both protocol generations, with go-sdk's
// client and a go-sdk upstream.

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// subscribableUpstream is a go-sdk server whose prompts a test adds to and
// whose resources may be subscribed, counting the subscriptions it holds.
type subscribableUpstream struct {
	srv  *mcp.Server
	url  string
	mu   sync.Mutex
	subs map[string]int
}

func startSubscribableUpstream(t *testing.T) *subscribableUpstream {
	t.Helper()
	u := &subscribableUpstream{subs: map[string]int{}}
	count := func(uri string, n int) {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.subs[uri] += n
	}
	u.srv = mcp.NewServer(&mcp.Implementation{Name: "watch-upstream", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(_ context.Context, req *mcp.SubscribeRequest) error { count(req.Params.URI, 1); return nil },
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error { count(req.Params.URI, -1); return nil },
	})
	u.addPrompt("greet")
	for _, uri := range []string{"file:///readme", "file:///other"} {
		u.srv.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "body"}}}, nil
		})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.srv }, nil))
	t.Cleanup(ts.Close)
	u.url = ts.URL + "/mcp"
	return u
}

func (u *subscribableUpstream) addPrompt(name string) {
	u.srv.AddPrompt(&mcp.Prompt{Name: name}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
}

func (u *subscribableUpstream) subscribed(uri string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.subs[uri]
}

func waitE2E(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(appliedWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServerEndpoint_ListChangesAndSubscriptions(t *testing.T) {
	up := startSubscribableUpstream(t)
	e := newE2EEnvWith(t, 1, map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8"})
	base := e.replicas[0].url
	alice := e.signup(base, "alice-subs@example.com", "")
	bob := e.signup(base, "bob-subs@example.com", "")
	for _, p := range []*e2eUser{alice, bob} {
		p.api(http.MethodPost, "/api/v1/workspaces/"+p.personal+"/servers", map[string]any{"name": "docs", "url": up.url}, http.StatusCreated)
	}
	aliceKey := alice.createKey(alice.personal, "subs", "", nil)
	bobKey := bob.createKey(bob.personal, "subs", "", nil)

	for i, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			type client struct {
				cs      *mcp.ClientSession
				prompts chan struct{}
				updates chan string
			}
			connect := func(key string) client {
				c := client{prompts: make(chan struct{}, 8), updates: make(chan string, 8)}
				c.cs = e.session(t, base+"/mcp/docs", e2eBearer(key), version, &mcp.ClientOptions{
					PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) { c.prompts <- struct{}{} },
					ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
						c.updates <- req.Params.URI
					}})
				caps := c.cs.InitializeResult().Capabilities
				if caps.Prompts == nil || !caps.Prompts.ListChanged || caps.Resources == nil || !caps.Resources.Subscribe {
					t.Fatalf("capabilities = %+v, want prompts.listChanged and resources.subscribe, as the upstream's", caps)
				}
				return c
			}
			a, b := connect(aliceKey.Key), connect(bobKey.Key)
			ctx := context.Background()

			// Alice subscribes the readme, bob another resource (at
			// 2025-11-25 once the client's standalone stream, which it
			// opens after initialize, is there): the readme's update
			// reaches alice alone.
			subscribe := func(who string, cs *mcp.ClientSession, uri string) {
				var err error
				waitE2E(t, who+"'s subscription", func() bool {
					err = cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
					return err == nil
				})
			}
			subscribe("alice", a.cs, "file:///readme")
			subscribe("bob", b.cs, "file:///other")
			if version == "2025-11-25" {
				waitE2E(t, "the upstream subscription", func() bool { return up.subscribed("file:///readme") == 1 })
			}
			waitE2E(t, "alice's update", func() bool {
				_ = up.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "file:///readme"})
				select {
				case uri := <-a.updates:
					return uri == "file:///readme"
				case <-time.After(100 * time.Millisecond):
					return false
				}
			})
			select {
			case uri := <-b.updates:
				t.Errorf("bob (another workspace, another resource) was told of %s", uri)
			case <-time.After(200 * time.Millisecond):
			}

			// A prompt the upstream added, found by alice's discovery,
			// reaches her client (its stream open by now); bob's workspace
			// discovered nothing new.
			up.addPrompt("farewell" + version)
			alice.api(http.MethodPost, "/api/v1/workspaces/"+alice.personal+"/servers/docs/discover", nil, http.StatusOK)
			select {
			case <-a.prompts:
			case <-time.After(appliedWait):
				t.Fatal("alice got no notifications/prompts/list_changed after the discovery")
			}
			if res, err := a.cs.ListPrompts(ctx, nil); err != nil || len(res.Prompts) != 2+i {
				t.Errorf("alice's prompts after the notification = %+v, %v", res, err)
			}
			select {
			case <-b.prompts:
				t.Error("bob was told of a prompts change his workspace's server did not have")
			case <-time.After(300 * time.Millisecond):
			}

			// Unsubscribing the last one unsubscribes upstream (2025: the
			// upstream counts its subscriptions; 2026-07-28's are listens).
			if err := a.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "file:///readme"}); err != nil {
				t.Fatalf("alice Unsubscribe() err = %v", err)
			}
			if version == "2025-11-25" {
				waitE2E(t, "the upstream unsubscription", func() bool { return up.subscribed("file:///readme") == 0 })
				_ = b.cs.Close()
				waitE2E(t, "bob's subscription dropped with his stream", func() bool { return up.subscribed("file:///other") == 0 })
			}
		})
	}
}
