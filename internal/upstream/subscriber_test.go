package upstream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

// subscribingUpstream is a go-sdk server whose resources may be
// subscribed, behind a credential header.
type subscribingUpstream struct {
	srv  *mcp.Server
	url  string
	mu   sync.Mutex
	subs map[string]int // subscribe minus unsubscribe, per URI
	h    http.Handler   // under mu: restart replaces it
}

// restart stands for the server restarting: its sessions end, and a new
// handler knows none of them.
func (u *subscribingUpstream) restart() {
	u.mu.Lock()
	u.h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.srv }, nil)
	u.mu.Unlock()
	for ss := range u.srv.Sessions() {
		_ = ss.Close()
	}
}

func startSubscribingUpstream(t *testing.T) *subscribingUpstream {
	t.Helper()
	u := &subscribingUpstream{subs: map[string]int{}}
	u.srv = mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			u.mu.Lock()
			defer u.mu.Unlock()
			u.subs[req.Params.URI]++
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			u.mu.Lock()
			defer u.mu.Unlock()
			u.subs[req.Params.URI]--
			return nil
		},
	})
	u.srv.AddResource(&mcp.Resource{URI: "file:///a", Name: "a"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "file:///a", Text: "a"}}}, nil
	})
	u.h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sub-secret-credential" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		u.mu.Lock()
		h := u.h
		u.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	u.url = ts.URL
	return u
}

func (u *subscribingUpstream) subscribed(uri string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.subs[uri]
}

// TestSubscriber_UpdatesAndUnsubscribe: a Subscriber hears the updates of
// the URI it subscribed, with the target's credential, at both protocol
// generations, and none after it unsubscribed.
func TestSubscriber_UpdatesAndUnsubscribe(t *testing.T) {
	for _, version := range []string{"2025-11-25", ""} {
		t.Run(cmpOrNewest(version), func(t *testing.T) {
			up := startSubscribingUpstream(t)
			pool := New[string](Options{Network: loopback, ProtocolVersion: version})
			t.Cleanup(func() { _ = pool.Close() })
			updates := make(chan string, 8)
			target := Target{URL: up.url, Headers: map[string]mcpgate.Secret{"Authorization": "Bearer sub-secret-credential"}}
			ctx := context.Background()
			s, err := pool.OpenSubscriber(ctx, target, func(uri string) { updates <- uri })
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			if !s.Subscribes() {
				t.Fatal("Subscribes() = false for an upstream that declares resources.subscribe")
			}
			if err := s.Subscribe(ctx, "file:///a"); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the upstream subscription", func() bool { return up.subscribed("file:///a") == 1 || version == "" })
			// At 2026-07-28 the subscription is a listen stream, which the
			// server may take a moment to register: notify until heard.
			deadline := time.Now().Add(10 * time.Second)
			for heard := false; !heard; {
				if time.Now().After(deadline) {
					t.Fatal("no notifications/resources/updated reached the subscriber")
				}
				_ = up.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "file:///a"})
				select {
				case uri := <-updates:
					if uri != "file:///a" {
						t.Fatalf("updated %q", uri)
					}
					heard = true
				case <-time.After(50 * time.Millisecond):
				}
			}
			if err := s.Unsubscribe(ctx, "file:///a"); err != nil {
				t.Fatal(err)
			}
			if version != "" {
				waitFor(t, "the upstream subscription", func() bool { return up.subscribed("file:///a") == 0 })
			}
		})
	}
}

// TestSubscriber_Refused: a target outside the hop's policy is refused
// before anything is sent, and a refused credential's error names no
// credential.
// TestSubscriber_DoneWhenTheUpstreamEndsIt: a Subscriber's Done is
// closed when the upstream no longer knows its session (a restart), so
// that its owner can open another; and when it is closed.
func TestSubscriber_DoneWhenTheUpstreamEndsIt(t *testing.T) {
	up := startSubscribingUpstream(t)
	pool := New[string](Options{Network: loopback, ProtocolVersion: "2025-11-25"})
	t.Cleanup(func() { _ = pool.Close() })
	target := Target{URL: up.url, Headers: map[string]mcpgate.Secret{"Authorization": "Bearer sub-secret-credential"}}
	ctx := context.Background()
	s, err := pool.OpenSubscriber(ctx, target, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Subscribe(ctx, "file:///a"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
		t.Fatal("Done before the session ended")
	default:
	}
	up.restart()
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the upstream ended the session")
	}

	other, err := pool.OpenSubscriber(ctx, target, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	_ = other.Close()
	select {
	case <-other.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed by Close")
	}
}

func TestSubscriber_Refused(t *testing.T) {
	pool := New[string](Options{})
	t.Cleanup(func() { _ = pool.Close() })
	if _, err := pool.OpenSubscriber(context.Background(), Target{URL: "http://127.0.0.1:1/mcp"}, func(string) {}); err == nil {
		t.Fatal("a loopback target was opened without the private network allowed")
	}
	up := startSubscribingUpstream(t)
	lp := New[string](Options{Network: loopback})
	t.Cleanup(func() { _ = lp.Close() })
	_, err := lp.OpenSubscriber(context.Background(), Target{URL: up.url,
		Headers: map[string]mcpgate.Secret{"Authorization": "Bearer wrong-credential-123"}}, func(string) {})
	if err == nil || strings.Contains(err.Error(), "wrong-credential-123") {
		t.Fatalf("OpenSubscriber with a refused credential err = %v", err)
	}
}

func cmpOrNewest(v string) string {
	if v == "" {
		return "newest"
	}
	return v
}
