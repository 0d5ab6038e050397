package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/mcpgate/mcpgate"
)

func mustCall(t *testing.T, p *Pool[string], target Target, req CallRequest) *CallResult {
	t.Helper()
	res, err := p.Call(context.Background(), "ws1/fx", target, req)
	if err != nil {
		t.Fatalf("Call(%s) err = %v", req.Tool, err)
	}
	if res.IsError && req.Tool != "fail" {
		t.Fatalf("Call(%s) = %s, an error result", req.Tool, res.Raw)
	}
	return res
}

// TestCall_PassesResultsThrough relays every content type, structured
// content and isError as the upstream sent them.
func TestCall_PassesResultsThrough(t *testing.T) {
	noLeaks(t)
	f := &fixture{}
	ts := f.serve(t)
	p := newPool(t, Options{})
	target := Target{URL: ts.URL}

	media := mustCall(t, p, target, CallRequest{Tool: "media", Arguments: json.RawMessage(`{"text":"x"}`)})
	var got struct {
		Content []map[string]any `json:"content"`
	}
	if err := json.Unmarshal(media.Raw, &got); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, c := range got.Content {
		types = append(types, c["type"].(string))
	}
	if diff := cmp.Diff([]string{"text", "image", "resource", "resource_link"}, types); diff != "" {
		t.Errorf("content types (-want +got):\n%s", diff)
	}
	if got.Content[1]["data"] != "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=" {
		t.Errorf("image data = %v, want the PNG unchanged", got.Content[1]["data"])
	}

	sum := mustCall(t, p, target, CallRequest{Tool: "sum", Arguments: json.RawMessage(`{"a":2,"b":3}`)})
	var structured struct {
		StructuredContent map[string]any `json:"structuredContent"`
	}
	if json.Unmarshal(sum.Raw, &structured) != nil || structured.StructuredContent["sum"] != 5.0 {
		t.Errorf("sum result = %s, want structuredContent {sum:5}", sum.Raw)
	}

	fail := mustCall(t, p, target, CallRequest{Tool: "fail", Arguments: json.RawMessage(`{"text":""}`)})
	if !fail.IsError || !strings.Contains(string(fail.Raw), "it broke") {
		t.Errorf("fail result = %s (IsError %v), want isError with the upstream's text", fail.Raw, fail.IsError)
	}
}

// TestCall_RelaysMeta relays the caller's _meta but replaces the progress
// token and the 2026-07-28 keys that describe the caller's own session.
func TestCall_RelaysMeta(t *testing.T) {
	noLeaks(t)
	f := &fixture{}
	ts := f.serve(t)
	p := newPool(t, Options{})
	res := mustCall(t, p, Target{URL: ts.URL}, CallRequest{Tool: "meta", Arguments: json.RawMessage(`{"text":""}`),
		Meta: map[string]any{"trace": "abc", "progressToken": "client-token", "io.modelcontextprotocol/clientInfo": map[string]any{"name": "victim"}}})
	var got struct {
		Meta struct {
			Seen map[string]any `json:"seen"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(res.Raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Meta.Seen["trace"] != "abc" {
		t.Errorf("upstream saw _meta %v, want trace relayed", got.Meta.Seen)
	}
	if tok, _ := got.Meta.Seen["progressToken"].(string); !strings.HasPrefix(tok, "mcpgate-") {
		t.Errorf("upstream saw progressToken %v, want the gateway's own", got.Meta.Seen["progressToken"])
	}
	if _, ok := got.Meta.Seen["io.modelcontextprotocol/clientInfo"]; ok {
		t.Errorf("upstream saw the caller's clientInfo: %v", got.Meta.Seen)
	}
}

// TestCall_ProgressRelayedAndResetsIdle: a call that reports progress every
// 40 ms lives past an idle timeout of 300 ms; one that is silent does not.
func TestCall_ProgressRelayedAndResetsIdle(t *testing.T) {
	noLeaks(t)
	f := &fixture{}
	ts := f.serve(t)
	p := newPool(t, Options{})
	target := Target{URL: ts.URL}
	var mu sync.Mutex
	var seen []Progress
	res := mustCall(t, p, target, CallRequest{Tool: "wait", Arguments: json.RawMessage(`{"steps":12,"every_ms":40}`),
		Limits: Limits{IdleTimeout: 300 * time.Millisecond},
		OnProgress: func(pr Progress) {
			mu.Lock()
			seen = append(seen, pr)
			mu.Unlock()
		}})
	if res.IsError {
		t.Fatalf("wait result = %s", res.Raw)
	}
	mu.Lock()
	// The last notification may be handled after the answer retired the
	// call (go-sdk handles notifications apart from answers); progress
	// after the answer is of no use to a caller anyway.
	if len(seen) < 11 || seen[len(seen)-1].Total != 12 || seen[len(seen)-1].Progress != float64(len(seen)) {
		t.Errorf("progress relayed = %v, want at least 11 of 12 notifications, in order", seen)
	}
	mu.Unlock()

	_, err := p.Call(context.Background(), "ws1/fx", target, CallRequest{Tool: "silent", Arguments: json.RawMessage(`{"steps":0,"every_ms":5000}`),
		Limits: Limits{IdleTimeout: 100 * time.Millisecond}})
	if e := (*Error)(nil); !errors.As(err, &e) || e.Kind != KindIdle {
		t.Fatalf("silent call err = %v, want KindIdle", err)
	}
	// A call ended by the gateway retires its session; the next opens one.
	mustCall(t, p, target, CallRequest{Tool: "count", Arguments: json.RawMessage(`{"text":""}`)})
}

// TestCall_AbsoluteTimeout ends a call whose progress never stops.
func TestCall_AbsoluteTimeout(t *testing.T) {
	noLeaks(t)
	f := &fixture{}
	ts := f.serve(t)
	p := newPool(t, Options{})
	_, err := p.Call(context.Background(), "k", Target{URL: ts.URL}, CallRequest{Tool: "wait", Arguments: json.RawMessage(`{"steps":40,"every_ms":20}`),
		Limits: Limits{IdleTimeout: time.Second, CallTimeout: 300 * time.Millisecond}})
	if e := (*Error)(nil); !errors.As(err, &e) || e.Kind != KindTimeout {
		t.Fatalf("Call() err = %v, want KindTimeout", err)
	}
	if mcpgate.ErrorCode(err) != mcpgate.EUnavailable {
		t.Errorf("ErrorCode = %v, want unavailable", mcpgate.ErrorCode(err))
	}
}

// TestCall_ByteCap refuses an answer past the cap, counted while reading,
// from an event stream and from a plain JSON answer (whose cut breaks the
// SDK's connection: the next call must still work).
func TestCall_ByteCap(t *testing.T) {
	t.Run("event stream", func(t *testing.T) { testByteCap(t, &fixture{}) })
	t.Run("JSON", func(t *testing.T) { testByteCap(t, &fixture{jsonResponse: true}) })
}

func testByteCap(t *testing.T, f *fixture) {
	noLeaks(t)
	ts := f.serve(t)
	p := newPool(t, Options{})
	target := Target{URL: ts.URL}
	_, err := p.Call(context.Background(), "k", target, CallRequest{Tool: "big", Arguments: json.RawMessage(`{"text":""}`),
		Limits: Limits{MaxAnswerBytes: 64 << 10}})
	if e := (*Error)(nil); !errors.As(err, &e) || e.Kind != KindTooLarge {
		t.Fatalf("Call() err = %v, want KindTooLarge", err)
	}
	// Under the default cap (10 MiB) the same answer passes.
	res := mustCall(t, p, target, CallRequest{Tool: "big", Arguments: json.RawMessage(`{"text":""}`)})
	if len(res.Raw) < 256<<10 {
		t.Errorf("big result is %d bytes, want all of it", len(res.Raw))
	}
}

// TestCall_CallerGoesAway: a caller whose context ends gets its context's
// error at once, and nothing is left running once the pool closes.
func TestCall_CallerGoesAway(t *testing.T) {
	noLeaks(t)
	f := &fixture{}
	ts := f.serve(t)
	p := newPool(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := p.Call(ctx, "k", Target{URL: ts.URL}, CallRequest{Tool: "silent", Arguments: json.RawMessage(`{"steps":0,"every_ms":1000}`)})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Call() err = %v, want the caller's deadline", err)
	}
}

// TestSession_Reused opens one upstream session per key and reuses it.
func TestSession_Reused(t *testing.T) {
	noLeaks(t)
	f := &fixture{}
	ts := f.serve(t)
	p := newPool(t, Options{})
	target := Target{URL: ts.URL}
	for range 3 {
		mustCall(t, p, target, CallRequest{Tool: "count", Arguments: json.RawMessage(`{"text":""}`)})
	}
	if n := f.inits.Load(); n != 1 {
		t.Errorf("sessions initialized = %d after 3 calls on one key, want 1", n)
	}
	if _, err := p.Call(context.Background(), "another person", target, CallRequest{Tool: "count", Arguments: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if n := f.inits.Load(); n != 2 {
		t.Errorf("sessions initialized = %d after a second key, want 2 (keys never share)", n)
	}
	// A new credential for the same key is a new session: the old one was
	// opened with the old headers.
	rotated := Target{URL: ts.URL, Headers: map[string]mcpgate.Secret{"Authorization": "Bearer rotated"}}
	mustCall(t, p, rotated, CallRequest{Tool: "count", Arguments: json.RawMessage(`{}`)})
	if n := f.inits.Load(); n != 3 {
		t.Errorf("sessions initialized = %d after the credential changed, want 3", n)
	}
	if got := f.received()[len(f.received())-1].Get("Authorization"); got != "Bearer rotated" {
		t.Errorf("Authorization = %q, want the new credential", got)
	}
	if p.Sessions() != 2 {
		t.Errorf("Sessions() = %d, want 2 (the old session of the key retired)", p.Sessions())
	}
}

// TestSession_ClosedWhenIdle closes a session unused for SessionIdle.
func TestSession_ClosedWhenIdle(t *testing.T) {
	noLeaks(t)
	f := &fixture{}
	ts := f.serve(t)
	p := newPool(t, Options{SessionIdle: 50 * time.Millisecond})
	mustCall(t, p, Target{URL: ts.URL}, CallRequest{Tool: "count", Arguments: json.RawMessage(`{}`)})
	deadline := time.Now().Add(5 * time.Second)
	for p.Sessions() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if p.Sessions() != 0 {
		t.Fatalf("Sessions() = %d after idling, want 0", p.Sessions())
	}
}

// TestSession_ExpiredReinitialises: after the upstream forgets its
// sessions (a restart: a new go-sdk handler), a call marked safe to repeat
// is sent again on a new session; one not marked fails without running
// twice, and the next call finds the new session.
func TestSession_ExpiredReinitialises(t *testing.T) {
	// The replaced handlers keep their server sessions (go-sdk has no
	// handler Close, #440): those server-side readers are not ours.
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		goleak.VerifyNone(t, opt, goleak.IgnoreTopFunction("github.com/modelcontextprotocol/go-sdk/mcp.(*streamableServerConn).Read"))
	})
	f := &fixture{}
	ts := f.serve(t)
	p := newPool(t, Options{})
	target := Target{URL: ts.URL}
	count := CallRequest{Tool: "count", Arguments: json.RawMessage(`{}`)}
	mustCall(t, p, target, count)

	f.reset()
	safe := count
	safe.SafeToRepeat = true
	mustCall(t, p, target, safe)
	if n := f.inits.Load(); n != 2 {
		t.Errorf("sessions initialized = %d, want 2", n)
	}

	f.reset()
	before := f.calls.Load()
	if before != 2 {
		t.Fatalf("count ran %d times, want 2", before)
	}
	_, err := p.Call(context.Background(), "ws1/fx", target, count)
	if e := (*Error)(nil); !errors.As(err, &e) || e.Kind != KindSessionExpired {
		t.Fatalf("unsafe call err = %v, want KindSessionExpired", err)
	}
	if f.calls.Load() != before {
		t.Errorf("the unsafe call ran on the upstream")
	}
	mustCall(t, p, target, count)
	if n := f.inits.Load(); n != 3 {
		t.Errorf("sessions initialized = %d, want 3 (re-initialised once, then reused)", n)
	}
}

// TestCall_SendsOnlyCredentialHeaders: the upstream receives the
// configured credential headers and the protocol's own, nothing else.
func TestCall_SendsOnlyCredentialHeaders(t *testing.T) {
	noLeaks(t)
	f := &fixture{}
	ts := f.serve(t)
	p := newPool(t, Options{})
	target := Target{URL: ts.URL, Headers: map[string]mcpgate.Secret{"X-Api-Key": "k-123456789", "Authorization": "Bearer up-secret-token"}}
	// A value of the caller's own in the context, as a front door's
	// request would carry: it must not turn into anything on the wire.
	ctx := context.WithValue(context.Background(), callerKey{}, "Authorization: Bearer downstream")
	if _, err := p.Call(ctx, "k", target, CallRequest{Tool: "count", Arguments: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"Accept": true, "Content-Type": true, "Content-Length": true, "User-Agent": true,
		"Accept-Encoding": true, "X-Api-Key": true, "Authorization": true}
	got := f.received()
	if len(got) == 0 {
		t.Fatal("the upstream received nothing")
	}
	for _, h := range got {
		for name := range h {
			if !allowed[name] && !strings.HasPrefix(name, "Mcp-") {
				t.Errorf("upstream received header %s", name)
			}
		}
		if h.Get("Authorization") != "Bearer up-secret-token" || h.Get("X-Api-Key") != "k-123456789" {
			t.Errorf("upstream received credentials %q %q", h.Get("Authorization"), h.Get("X-Api-Key"))
		}
		if h.Get("User-Agent") != "mcpgate" {
			t.Errorf("User-Agent = %q", h.Get("User-Agent"))
		}
	}
	last := got[len(got)-1]
	if last.Get("Mcp-Protocol-Version") == "" || last.Get("Mcp-Session-Id") == "" {
		t.Errorf("the call carried no protocol version or session: %v", last)
	}
}

type callerKey struct{}

// TestCall_Stateless2026 calls a stateless go-sdk server, which speaks
// 2026-07-28: no session id and no initialize, yet one pooled client
// session serves the calls.
func TestCall_Stateless2026(t *testing.T) {
	noLeaks(t)
	f := &fixture{stateless: true}
	ts := f.serve(t)
	p := newPool(t, Options{})
	for range 2 {
		mustCall(t, p, Target{URL: ts.URL}, CallRequest{Tool: "count", Arguments: json.RawMessage(`{}`)})
	}
	if f.calls.Load() != 2 || p.Sessions() != 1 {
		t.Errorf("calls %d, sessions %d; want 2 calls on 1 pooled session", f.calls.Load(), p.Sessions())
	}
	for _, h := range f.received() {
		if h.Get("Mcp-Session-Id") != "" {
			t.Errorf("a stateless exchange carried a session id")
		}
	}
	if got := f.received()[len(f.received())-1].Get("Mcp-Protocol-Version"); got != "2026-07-28" {
		t.Errorf("protocol version = %q, want 2026-07-28", got)
	}
}
