//lint:file-ignore SA1019 sampling and roots are relayed while the protocol still has them (deprecated from 2026-07-28)

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/testutil"
)

const (
	relayUpstreamToken = "Bearer relay-upstream-credential-5be1c0d9"
	relayAnswer        = "teal-answer-8c41f0"
	relaySample        = "sampled-text-77e2a9"
	relayPrompt        = "the-sampling-prompt-91d3"
	relayHost          = "sso.allowed.example"
)

// relayUpstream is a go-sdk server (2025 protocols, with sessions) whose
// tools ask its client during the call: an elicitation (form and URL), a
// sampling, the roots, and one elicitation that waits for an answer (to
// see the client go away). Each tool says what it got without repeating
// an answer's values.
type relayUpstream struct {
	url string
	// asked is sent to when the waiting tool's elicitation went out;
	// ended receives what its Elicit returned.
	asked chan struct{}
	ended chan error
}

func startRelayUpstream(t *testing.T) *relayUpstream {
	t.Helper()
	u := &relayUpstream{asked: make(chan struct{}, 1), ended: make(chan error, 1)}
	s := mcp.NewServer(&mcp.Implementation{Name: "asking-upstream", Version: "v1"}, nil)
	text := func(format string, args ...any) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
	}
	obj := map[string]any{"type": "object"}
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
			Message:         "Pick a colour. (The server's own note: " + relayUpstreamToken + ")",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"colour": map[string]any{"type": "string"}}},
		})
		if err != nil {
			return text("error: %v", err), nil
		}
		return text("action=%s match=%t", res.Action, res.Content["colour"] == relayAnswer), nil
	})
	s.AddTool(&mcp.Tool{Name: "think", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 16,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: relayPrompt}}}})
		if err != nil {
			return text("error: %v", err), nil
		}
		tc, _ := res.Content.(*mcp.TextContent)
		return text("model=%s match=%t", res.Model, tc != nil && tc.Text == relaySample), nil
	})
	s.AddTool(&mcp.Tool{Name: "roots", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return text("error: %v", err), nil
		}
		return text("roots=%d", len(res.Roots)), nil
	})
	s.AddTool(&mcp.Tool{Name: "open", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", ElicitationID: "sso-1",
			URL: "https://" + relayHost + "/start", Message: "Sign in to the vendor"})
		if err != nil {
			return text("error: %v", err), nil
		}
		return text("action=%s", res.Action), nil
	})
	s.AddTool(&mcp.Tool{Name: "wait", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		u.asked <- struct{}{}
		_, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "wait for me",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}})
		u.ended <- err
		return text("ended"), nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != relayUpstreamToken {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	u.url = ts.URL + "/mcp"
	return u
}

// roundRobin sends each request to the next of the replicas' hosts, as a
// load balancer without affinity does.
type roundRobin struct {
	base  http.RoundTripper
	hosts []string
	next  atomic.Uint64
}

func (rr *roundRobin) RoundTrip(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	out.URL.Host = rr.hosts[rr.next.Add(1)%uint64(len(rr.hosts))]
	out.Host = ""
	return rr.base.RoundTrip(out)
}

// TestRelay_E2E: an upstream's requests to its client during a call reach
// the caller's real go-sdk client (2025-11-25) through the server's own
// endpoint on two replicas, each request of the client to the other
// replica than the last (so the answer to a relayed request lands on
// another replica than the call): an elicitation in form mode at once,
// sampling and roots only once an admin allows them, a URL elicitation
// only to an allowed host; the client going away mid-elicitation ends the
// upstream's request at once. The audit log records each relay (method,
// the message with the credential replaced, mode, host, action), and no
// log, audit row or table holds the sampling prompt, an answer's values or
// the credential.
func TestRelay_E2E(t *testing.T) {
	// The upstream first: it closes after the replicas, whose sessions
	// with it would hold its Close otherwise.
	up := startRelayUpstream(t)
	e := newE2EEnvWith(t, 2, map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8"})
	admin := e.signup(e.replicas[0].url, "relay-admin@example.com", "")
	ws := admin.personal
	e.rec.secret(strings.TrimPrefix(relayUpstreamToken, "Bearer "), "the upstream's credential")
	admin.api(http.MethodPost, "/api/v1/workspaces/"+ws+"/servers", map[string]any{"name": "asker", "url": up.url,
		"headers": map[string]string{"Authorization": relayUpstreamToken}}, http.StatusCreated)
	turnAllToolsOn(t, admin, ws, "asker")
	key := admin.createKey(ws, "relay", "", nil)

	var hosts []string
	for _, r := range e.replicas {
		ru, _ := url.Parse(r.url)
		hosts = append(hosts, ru.Host)
	}
	client := e.httpClient(e2eBearer(key.Key), "")
	client.Transport = &roundRobin{base: client.Transport, hosts: hosts}
	client.Timeout = 0 // a call waits for a person; the test's contexts bound it
	waiting := make(chan struct{}, 1)
	opts := &mcp.ClientOptions{
		// Both modes of elicitation (go-sdk declares form alone by itself),
		// and the roots go-sdk declares when no capabilities are given.
		Capabilities: &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true},
			Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			switch {
			case req.Params.Message == "wait for me":
				waiting <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			case req.Params.Mode == "url":
				return &mcp.ElicitResult{Action: "accept"}, nil
			}
			if strings.Contains(req.Params.Message, relayUpstreamToken) {
				return nil, errors.New("the server's credential reached the client")
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"colour": relayAnswer}}, nil
		},
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: &mcp.TextContent{Text: relaySample}}, nil
		},
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "relay-e2e", Version: "v0"}, opts)
	c.AddRoots(&mcp.Root{URI: "file:///work", Name: "work"})
	connect := func() *mcp.ClientSession {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.replicas[0].url + "/mcp/asker", HTTPClient: client,
			MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("Connect() err = %v", err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	cs := connect()
	call := func(name string) string { return testutil.ToolText(e2eCall(t, cs, name, nil)) }

	if got := call("ask"); got != "action=accept match=true" {
		t.Fatalf("ask = %q, want the person's answer to reach the server", got)
	}
	if got := call("think"); !strings.HasPrefix(got, "error") {
		t.Fatalf("think with sampling off = %q, want the server refused", got)
	}
	if got := call("roots"); !strings.HasPrefix(got, "error") {
		t.Fatalf("roots with roots off = %q, want the server refused", got)
	}
	if got := call("open"); !strings.HasPrefix(got, "error") {
		t.Fatalf("open to a host not allowed = %q, want the server refused", got)
	}
	admin.api(http.MethodPatch, "/api/v1/workspaces/"+ws+"/servers/asker", map[string]any{"allow_sampling": true,
		"allow_roots": true, "elicitation_url_hosts": []string{relayHost}}, http.StatusOK)
	e.waitApplied(t)
	// The sessions declare what the server is allowed from the next
	// connection: a client's capabilities are its initialize's.
	cs = connect()
	if got := call("think"); got != "model=test-model match=true" {
		t.Fatalf("think with sampling on = %q, want the client's sample", got)
	}
	if got := call("roots"); got != "roots=1" {
		t.Fatalf("roots with roots on = %q, want the client's one root", got)
	}
	if got := call("open"); got != "action=accept" {
		t.Fatalf("open to an allowed host = %q, want the client's accept", got)
	}

	// The client goes away while a person would be answering.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{}})
		done <- err
	}()
	for _, ch := range []chan struct{}{up.asked, waiting} {
		select {
		case <-ch:
		case <-time.After(20 * time.Second):
			t.Fatal("the waiting elicitation never reached the client")
		}
	}
	cancel()
	select {
	case err := <-up.ended:
		if err == nil {
			t.Fatal("the upstream's elicitation was answered although the client went away")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the upstream's elicitation still waits after the client went away")
	}
	<-done

	items := admin.auditUntil(ws, "action=server.client_request", func(items []e2eAuditItem) bool { return len(items) >= 8 })
	byAction := map[string]int{}
	for _, it := range items {
		byAction[fmt.Sprint(it.Arguments["method"], " ", it.Arguments["action"])]++
		if m, _ := it.Arguments["message"].(string); strings.Contains(m, "Pick a colour") && !strings.Contains(m, "[redacted]") {
			t.Errorf("audited message %q: want the server's credential replaced", m)
		}
	}
	for want, n := range map[string]int{"elicitation/create accept": 2, "elicitation/create refused": 1,
		"sampling/createMessage refused": 1, "sampling/createMessage answered": 1, "roots/list refused": 1,
		"roots/list answered": 1, "elicitation/create not_answered": 1} {
		if byAction[want] < n {
			t.Errorf("audit: %d of %q, want at least %d (all: %v)", byAction[want], want, n, byAction)
		}
	}
	seen := e.noSecretLeaks(t)
	for where, text := range seen {
		for _, v := range []string{relayAnswer, relaySample, relayPrompt} {
			if strings.Contains(text, v) {
				t.Errorf("%s holds %q, a relayed request's or answer's value", where, v)
			}
		}
	}
}

// startMRTRUpstream is a go-sdk server at 2026-07-28 (stateless) whose tool
// asks for input by an input_required result with a state of its own, and
// checks on the retry that it got its own state back with the answer.
func startMRTRUpstream(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "mrtr-upstream", Version: "v1"}, nil)
	s.AddTool(&mcp.Tool{Name: "pick", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.Params.RequestState == "" {
				return &mcp.CallToolResult{RequestState: "upstream-state-4d2b",
					InputRequests: mcp.InputRequestMap{"colour": &mcp.ElicitParams{Message: "Pick a colour",
						RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"colour": map[string]any{"type": "string"}}}}}}, nil
			}
			r, _ := req.Params.InputResponses["colour"].(*mcp.ElicitResult)
			ok := r != nil && r.Action == "accept" && r.Content["colour"] == relayAnswer
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
				Text: fmt.Sprintf("state=%t match=%t", req.Params.RequestState == "upstream-state-4d2b", ok)}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestRelay_E2E_MultiRoundTrip: an upstream at 2026-07-28 asks for input
// by an input_required result. A 2026-07-28 caller gets that result with
// the upstream's state sealed in the gateway's envelope (never the
// upstream's own), answers in its retry (on the other replica), and the
// upstream gets its own state back with the answer; the envelope does not
// open for another key. A 2025-11-25 caller, which cannot retry so, is
// asked on its call's stream and the gateway retries for it.
func TestRelay_E2E_MultiRoundTrip(t *testing.T) {
	upURL := startMRTRUpstream(t) // first: see TestRelay_E2E
	e := newE2EEnvWith(t, 2, map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8"})
	admin := e.signup(e.replicas[0].url, "mrtr-admin@example.com", "")
	ws := admin.personal
	admin.api(http.MethodPost, "/api/v1/workspaces/"+ws+"/servers", map[string]any{"name": "picker", "url": upURL},
		http.StatusCreated)
	turnAllToolsOn(t, admin, ws, "picker")
	key, other := admin.createKey(ws, "mrtr", "", nil), admin.createKey(ws, "other", "", nil)
	answer := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"colour": relayAnswer}}, nil
	}
	session := func(k, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
		return roundRobinSession(t, e, "/mcp/picker", k, version, opts)
	}

	manual := session(key.Key, "", &mcp.ClientOptions{ElicitationHandler: answer,
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	first := e2eCall(t, manual, "pick", nil)
	if !first.NeedsInput() || first.InputRequests["colour"] == nil {
		t.Fatalf("first call = %+v, want the upstream's input request", first)
	}
	if !strings.HasPrefix(first.RequestState, "mcpgu1_") || strings.Contains(first.RequestState, "upstream-state") {
		t.Fatalf("requestState %q: want the gateway's sealed envelope, not the upstream's state", first.RequestState)
	}
	retry := func(cs *mcp.ClientSession) string {
		return retryWithAnswer(t, cs, "pick", first.RequestState, "colour")
	}
	if got := retry(manual); got != "state=true match=true" {
		t.Fatalf("retry = %q, want the upstream's own state and the answer", got)
	}
	if got := retry(session(other.Key, "", &mcp.ClientOptions{ElicitationHandler: answer,
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})); !strings.Contains(got, "not valid") {
		t.Fatalf("the envelope under another key = %q, want refused", got)
	}

	auto := session(key.Key, "", &mcp.ClientOptions{ElicitationHandler: answer})
	if got := testutil.ToolText(e2eCall(t, auto, "pick", nil)); got != "state=true match=true" {
		t.Fatalf("a 2026-07-28 client retrying by itself = %q", got)
	}
	legacy := session(key.Key, "2025-11-25", &mcp.ClientOptions{ElicitationHandler: answer})
	if got := testutil.ToolText(e2eCall(t, legacy, "pick", nil)); got != "state=true match=true" {
		t.Fatalf("a 2025-11-25 client, asked on its stream = %q", got)
	}
}

// TestRelay_E2E_ApprovedInputRetry: an upstream tool under a person's
// approval, in a workspace where calls wait for the decision, that asks
// for input once approved. The approved call's answer is the upstream's
// input_required result as it came (its state sealed), not a gateway
// wrapping of it; and the retry that answers it runs under the same
// approval: nobody is asked again.
func TestRelay_E2E_ApprovedInputRetry(t *testing.T) {
	upURL := startMRTRUpstream(t) // first: see TestRelay_E2E
	e := newE2EEnvWith(t, 1, map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8"})
	admin := e.signup(e.replicas[0].url, "approved-mrtr@example.com", "")
	ws := admin.personal
	admin.api(http.MethodPost, "/api/v1/workspaces/"+ws+"/servers", map[string]any{"name": "picker", "url": upURL},
		http.StatusCreated)
	turnAllToolsOn(t, admin, ws, "picker")
	admin.api(http.MethodPut, "/api/v1/workspaces/"+ws+"/servers/picker/tools/pick",
		map[string]any{"enabled": true, "approval": "human"}, http.StatusOK)
	admin.api(http.MethodPatch, "/api/v1/workspaces/"+ws, map[string]any{"approval_wait_seconds": 50}, http.StatusOK)
	key := admin.createKey(ws, "mrtr", "", nil)
	cs, err := e2eConnect(t, &mcp.StreamableClientTransport{Endpoint: e.replicas[0].url + "/mcp/picker",
		HTTPClient: e.httpClient(e2eBearer(key.Key), ""), MaxRetries: -1}, "",
		&mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"colour": relayAnswer}}, nil
			}}, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	approvals := func() []string {
		var list struct {
			Approvals []struct {
				ID    string `json:"id"`
				State string `json:"state"`
			} `json:"approvals"`
		}
		admin.decode(admin.api(http.MethodGet, "/api/v1/workspaces/"+ws+"/approvals", nil, http.StatusOK), &list)
		var out []string
		for _, ap := range list.Approvals {
			out = append(out, ap.ID+"="+ap.State)
		}
		return out
	}

	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pick", Arguments: map[string]any{}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	var pending string
	deadline := time.Now().Add(20 * time.Second)
	for pending == "" {
		if time.Now().After(deadline) {
			t.Fatal("the call asked for no approval")
		}
		for _, ap := range approvals() {
			if id, ok := strings.CutSuffix(ap, "=pending"); ok {
				pending = id
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	admin.api(http.MethodPost, "/api/v1/workspaces/"+ws+"/approvals/"+pending+"/approve", nil, http.StatusOK)
	first := <-done
	if !first.NeedsInput() || first.InputRequests["colour"] == nil || !strings.HasPrefix(first.RequestState, "mcpgu1_") {
		b, _ := json.Marshal(first)
		t.Fatalf("the approved call = %s, want the upstream's input request with the gateway's sealed state", b)
	}
	if got := retryWithAnswer(t, cs, "pick", first.RequestState, "colour"); got != "state=true match=true" {
		t.Fatalf("the retry = %q, want the upstream's answer, under the same approval", got)
	}
	// The same retry again would run the call again under the approval:
	// the envelope that carries it works once.
	if got := retryWithAnswer(t, cs, "pick", first.RequestState, "colour"); !strings.Contains(got, "used already") {
		t.Fatalf("the retry replayed = %q, want it refused", got)
	}
	if got := approvals(); len(got) != 1 || got[0] != pending+"=used" {
		t.Errorf("approvals = %q, want only the first, used", got)
	}
}

// TestRelay_E2E_HeldFor2026Client: a 2026-07-28 client (no sessions; it
// answers only by retrying) of an upstream on the 2025 protocols that asks
// its client mid-call. The gateway holds the call and asks the client by
// an input_required result; the retry, sent to the other replica, carries
// the answer to the held call and gets its result. go-sdk's client retries
// by itself; one that does not gets the request under the gateway's input
// id with a sealed state that does not open for another key.
func TestRelay_E2E_HeldFor2026Client(t *testing.T) {
	up := startRelayUpstream(t) // first: see TestRelay_E2E
	e := newE2EEnvWith(t, 2, map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "127.0.0.0/8"})
	admin := e.signup(e.replicas[0].url, "held-admin@example.com", "")
	ws := admin.personal
	e.rec.secret(strings.TrimPrefix(relayUpstreamToken, "Bearer "), "the upstream's credential")
	admin.api(http.MethodPost, "/api/v1/workspaces/"+ws+"/servers", map[string]any{"name": "asker", "url": up.url,
		"headers": map[string]string{"Authorization": relayUpstreamToken}}, http.StatusCreated)
	turnAllToolsOn(t, admin, ws, "asker")
	key, other := admin.createKey(ws, "held", "", nil), admin.createKey(ws, "other", "", nil)
	elicit := func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		if strings.Contains(req.Params.Message, relayUpstreamToken) {
			return nil, errors.New("the server's credential reached the client")
		}
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"colour": relayAnswer}}, nil
	}
	session := func(k string, opts *mcp.ClientOptions) *mcp.ClientSession {
		return roundRobinSession(t, e, "/mcp/asker", k, "", opts)
	}

	auto := session(key.Key, &mcp.ClientOptions{ElicitationHandler: elicit})
	if got := testutil.ToolText(e2eCall(t, auto, "ask", nil)); got != "action=accept match=true" {
		t.Fatalf("ask from a 2026-07-28 client = %q, want the person's answer to reach the server", got)
	}

	manual := session(key.Key, &mcp.ClientOptions{ElicitationHandler: elicit, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})
	first := e2eCall(t, manual, "ask", nil)
	ask, _ := first.InputRequests["mcpgate"].(*mcp.ElicitParams)
	if !first.NeedsInput() || ask == nil || !strings.HasPrefix(first.RequestState, "mcpgu1_") {
		b, _ := json.Marshal(first)
		t.Fatalf("first call = %s, want the upstream's elicitation as an input request with a sealed state", b)
	}
	if strings.Contains(ask.Message, relayUpstreamToken) || !strings.Contains(ask.Message, "Pick a colour") {
		t.Errorf("the elicitation's message = %q, want it with the server's credential replaced", ask.Message)
	}
	retry := func(cs *mcp.ClientSession) string {
		return retryWithAnswer(t, cs, "ask", first.RequestState, "mcpgate")
	}
	if got := retry(session(other.Key, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}})); !strings.Contains(got, "not valid") {
		t.Fatalf("the held call's state under another key = %q, want refused", got)
	}
	if got := retry(manual); got != "action=accept match=true" {
		t.Fatalf("the retry = %q, want the held call's result", got)
	}
}

// roundRobinSession connects a go-sdk client with key to the endpoint path
// of e, each request sent to the other replica than the last, at version
// ("" the newest).
func roundRobinSession(t *testing.T, e *e2eEnv, path, key, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	var hosts []string
	for _, r := range e.replicas {
		ru, _ := url.Parse(r.url)
		hosts = append(hosts, ru.Host)
	}
	client := e.httpClient(e2eBearer(key), "")
	client.Transport = &roundRobin{base: client.Transport, hosts: hosts}
	cs, err := e2eConnect(t, &mcp.StreamableClientTransport{Endpoint: e.replicas[0].url + path, HTTPClient: client,
		MaxRetries: -1}, version, opts, 20*time.Second)
	if err != nil {
		t.Fatalf("Connect(%q) err = %v", version, err)
	}
	return cs
}

// retryWithAnswer retries a call of tool with its request state, answering
// the input request inputID with the person's colour, and returns its text.
func retryWithAnswer(t *testing.T, cs *mcp.ClientSession, tool, state, inputID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}, RequestState: state,
		InputResponses: mcp.InputResponseMap{inputID: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"colour": relayAnswer}}}})
	if err != nil {
		t.Fatalf("retry err = %v", err)
	}
	return testutil.ToolText(res)
}
