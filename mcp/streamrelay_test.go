package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// relayOutcome is what a relaying tool call saw.
type relayOutcome struct {
	relay  mcpgate.Relay
	result json.RawMessage
	err    error
}

// relayTools is a tool service whose every call relays req to the caller's
// client (unless capsOnly) and reports what it saw on got. cancel, when
// set, ends the relay's context when it is closed.
type relayTools struct {
	mcpgate.ToolService
	req      mcpgate.ClientRequest
	capsOnly bool
	cancel   chan struct{}
	got      chan relayOutcome
}

func (f *relayTools) ToolSet(context.Context, *mcpgate.Actor) (*mcpgate.ToolSet, error) {
	return &mcpgate.ToolSet{All: map[string]mcpgate.ToolInfo{}}, nil
}

func (f *relayTools) CallTool(ctx context.Context, _ *mcpgate.Actor, _ mcpgate.ToolCall) (json.RawMessage, error) {
	r := mcpgate.RelayFromContext(ctx)
	out := relayOutcome{relay: r}
	if !f.capsOnly && r.Request != nil {
		if f.cancel != nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			go func() { <-f.cancel; cancel() }()
		}
		out.result, out.err = r.Request(ctx, f.req)
	}
	f.got <- out
	return json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), nil
}

func (f *relayTools) outcome(t *testing.T) relayOutcome {
	t.Helper()
	select {
	case o := <-f.got:
		return o
	case <-time.After(30 * time.Second): // a fail-safe, not a timed assertion
		t.Fatal("the tool call never ended")
		return relayOutcome{}
	}
}

// keysAuth knows three keys: the caller's, another key of the same person,
// and another person's, all in one workspace.
type keysAuth struct{}

func (keysAuth) Authenticate(_ context.Context, p mcpgate.Presented) (*mcpgate.Actor, error) {
	a := map[string]*mcpgate.Actor{
		"good-key":   {UserID: "u1", WorkspaceID: "w1", KeyID: "k1"},
		"second-key": {UserID: "u1", WorkspaceID: "w1", KeyID: "k2"},
		"person-key": {UserID: "u2", WorkspaceID: "w1", KeyID: "k3"},
	}[p.Value.Reveal()]
	if a == nil {
		return nil, &mcpgate.AuthError{Reason: "unknown"}
	}
	a.Scope, a.Source = mcpgate.ScopeFull, mcpgate.SourceMCP
	return a, nil
}

const elicitParams = `{"message":"Your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}`

// relayReplica serves one gateway's server endpoint with tools; answers,
// when set, is the store shared with other replicas.
func relayReplica(t *testing.T, tools *relayTools, answers RelayAnswers) (string, *Gateway) {
	t.Helper()
	g := New(Options{Tools: tools, Registry: connectors.NewRegistry(), Authenticators: []mcpgate.Authenticator{keysAuth{}},
		PublicURL: "http://gateway.test", ConfirmationSecret: []byte("serverendpoint-test-secret-0123456789"),
		RelayAnswers: answers})
	t.Cleanup(g.Close)
	eps := &fakeEndpoints{EndpointFn: func(string) (*mcpgate.ServerEndpoint, error) { return docsEndpoint(), nil }}
	mux := http.NewServeMux()
	mux.Handle("/mcp/{server}", g.ServerHandler(eps))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp/docs", g
}

func newRelayTools() *relayTools {
	return &relayTools{req: mcpgate.ClientRequest{Method: mcpgate.MethodElicit, Params: json.RawMessage(elicitParams)},
		got: make(chan relayOutcome, 4)}
}

// A go-sdk client at 2025-11-25 that answers elicitation gets the
// upstream's request on its call's stream, and the tool gets its answer;
// the call's relay says the client has form elicitation and roots, as its
// initialize declared (go-sdk's client declares roots unless told
// otherwise), and nothing else.
func TestStreamRelay_ElicitThroughGoSDKClient(t *testing.T) {
	tools := newRelayTools()
	url, _ := relayReplica(t, tools, nil)
	asked := make(chan *sdk.ElicitParams, 1)
	client := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			asked <- req.Params
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "ada"}}, nil
		}})
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: bearer{http.DefaultTransport}}, MaxRetries: -1, DisableStandaloneSSE: true},
		&sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if cs.ID() == "" {
		t.Fatal("no session id on a server of person scope: its capabilities would be lost")
	}
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "lookup", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("CallTool() = %+v, %v", res, err)
	}
	o := tools.outcome(t)
	if o.err != nil {
		t.Fatalf("Request() err = %v", o.err)
	}
	var got struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content"`
	}
	if err := json.Unmarshal(o.result, &got); err != nil || got.Action != "accept" || got.Content["name"] != "ada" {
		t.Errorf("Request() result = %s, want the client's accept with name ada", o.result)
	}
	if p := <-asked; p.Message != "Your name?" {
		t.Errorf("the client was asked %q", p.Message)
	}
	if want := (mcpgate.ClientCapabilities{ElicitationForm: true, Roots: true}); o.relay.Capabilities != want {
		t.Errorf("Capabilities = %+v, want %+v", o.relay.Capabilities, want)
	}
	if o.relay.InputRetry {
		t.Error("InputRetry on a 2025 call")
	}
}

// The capabilities a client declared on initialize are those of its later
// calls, read from the session id: none gives zero; sampling with tools,
// both elicitation modes and roots give them all; an absent id gives zero.
func TestStreamRelay_CapabilitiesFromSession(t *testing.T) {
	tools := newRelayTools()
	tools.capsOnly = true
	url, _ := relayReplica(t, tools, nil)
	all := mcpgate.ClientCapabilities{Sampling: true, SamplingTools: true, ElicitationForm: true, ElicitationURL: true, Roots: true}
	tests := []struct {
		name, caps string
		noID       bool
		want       mcpgate.ClientCapabilities
	}{
		{name: "none", caps: `{}`},
		{name: "all", caps: `{"sampling":{"tools":{}},"elicitation":{"form":{},"url":{}},"roots":{"listChanged":true}}`, want: all},
		{name: "url only", caps: `{"elicitation":{"url":{}}}`, want: mcpgate.ClientCapabilities{ElicitationURL: true}},
		{name: "no id sent back", caps: `{"sampling":{}}`, noID: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			session := initialize(t, url, "good-key", tt.caps)
			if tt.noID {
				session = ""
			}
			resp := postRPC(t, context.Background(), url, "good-key", session, callBody)
			readUntilResponse(t, bufio.NewReader(resp.Body))
			resp.Body.Close()
			if got := tools.outcome(t).relay.Capabilities; got != tt.want {
				t.Errorf("Capabilities = %+v, want %+v", got, tt.want)
			}
		})
	}
}

const callBody = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup","arguments":{}}}`

// initialize initializes a raw 2025-11-25 client declaring caps and
// returns its session id.
func initialize(t *testing.T, url, key, caps string) string {
	t.Helper()
	resp := postRPC(t, context.Background(), url, key, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+
		caps+`,"clientInfo":{"name":"t","version":"1"}}}`)
	defer resp.Body.Close()
	readUntilResponse(t, bufio.NewReader(resp.Body))
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		t.Fatal("initialize gave no session id")
	}
	return id
}

func postRPC(t *testing.T, ctx context.Context, url, key, session, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+key)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// postAnswer posts a client's answer and returns the status.
func postAnswer(t *testing.T, url, key, session, body string) int {
	t.Helper()
	resp := postRPC(t, context.Background(), url, key, session, body)
	resp.Body.Close()
	return resp.StatusCode
}

type sseMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
}

// nextMessage reads the next SSE event's message.
func nextMessage(t *testing.T, r *bufio.Reader) sseMessage {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended: %v", err)
		}
		if data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok && data != "" {
			var m sseMessage
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event %q: %v", data, err)
			}
			return m
		}
	}
}

func readUntilResponse(t *testing.T, r *bufio.Reader) sseMessage {
	t.Helper()
	for {
		if m := nextMessage(t, r); m.Method == "" {
			return m
		}
	}
}

// relayedRequest reads the call's stream up to the relayed request and
// returns its id.
func relayedRequest(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	for {
		m := nextMessage(t, r)
		if m.Method == "" {
			t.Fatalf("the call answered (%s) before relaying a request", m.Result)
		}
		if m.Method != mcpgate.MethodElicit {
			continue
		}
		var id string
		if err := json.Unmarshal(m.ID, &id); err != nil {
			t.Fatalf("relay id %s is not a string", m.ID)
		}
		if string(m.Params) != elicitParams {
			t.Errorf("params = %s, want the upstream's %s", m.Params, elicitParams)
		}
		return id
	}
}

func answerBody(id, name string) string {
	return `{"jsonrpc":"2.0","id":"` + id + `","result":{"action":"accept","content":{"name":"` + name + `"}}}`
}

// An answer from another key, another person, another session, without
// the session or under an altered id is taken (202, as go-sdk takes a
// response it has no request for) and delivered nowhere: the call goes on
// waiting and gets the real answer, once; the ids are unguessable (each
// new, 128 random bits).
func TestStreamRelay_AnswerBoundToCaller(t *testing.T) {
	tools := newRelayTools()
	url, _ := relayReplica(t, tools, nil)
	session := initialize(t, url, "good-key", `{"elicitation":{}}`)
	otherSession := initialize(t, url, "good-key", `{"elicitation":{}}`)
	resp := postRPC(t, context.Background(), url, "good-key", session, callBody)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("tools/call Content-Type = %q, want an event stream", ct)
	}
	stream := bufio.NewReader(resp.Body)
	id := relayedRequest(t, stream)
	random, ok := strings.CutPrefix(id, relayIDPrefix)
	if !ok || len(random) < 22 {
		t.Fatalf("relay id %q, want %s and at least 128 bits", id, relayIDPrefix)
	}
	forged := []struct{ name, key, session, id string }{
		{"other key", "second-key", "", id},
		{"other person", "person-key", "", id},
		{"other session", "good-key", otherSession, id},
		{"no session", "good-key", "", id},
		{"another id", "good-key", session, id + "x"},
		{"session not ours", "good-key", "mcs1.forged", id},
	}
	for _, f := range forged {
		if code := postAnswer(t, url, f.key, f.session, answerBody(f.id, f.name)); code != http.StatusAccepted {
			t.Errorf("%s: status %d, want 202", f.name, code)
		}
	}
	if code := postAnswer(t, url, "good-key", session, answerBody(id, "ada")); code != http.StatusAccepted {
		t.Errorf("the real answer: status %d, want 202", code)
	}
	o := tools.outcome(t)
	if o.err != nil || !strings.Contains(string(o.result), `"ada"`) {
		t.Fatalf("Request() = %s, %v; want the caller's answer (ada)", o.result, o.err)
	}
	readUntilResponse(t, stream)
	// Single use: the same answer again is taken and goes nowhere.
	if code := postAnswer(t, url, "good-key", session, answerBody(id, "again")); code != http.StatusAccepted {
		t.Errorf("a second answer: status %d, want 202", code)
	}

	// A second relay has another id.
	resp2 := postRPC(t, context.Background(), url, "good-key", session, callBody)
	defer resp2.Body.Close()
	stream2 := bufio.NewReader(resp2.Body)
	if id2 := relayedRequest(t, stream2); id2 == id {
		t.Errorf("two relays got the same id %q", id)
	} else {
		postAnswer(t, url, "good-key", session, `{"jsonrpc":"2.0","id":"`+id2+`","error":{"code":-1,"message":"user declined"}}`)
	}
	var rpcErr *mcpgate.ClientRPCError
	if o := tools.outcome(t); o.err == nil || !asClientRPCError(o.err, &rpcErr) || rpcErr.Code != -1 || rpcErr.Message != "user declined" {
		t.Errorf("Request() err = %v, want the client's JSON-RPC error", o.err)
	}
}

func asClientRPCError(err error, target **mcpgate.ClientRPCError) bool {
	e, ok := err.(*mcpgate.ClientRPCError)
	*target = e
	return ok
}

// The client going away mid-request (its call's POST ends) ends the
// relayed request at once with an error; the relay's context ending sends
// the client notifications/cancelled for the request's id.
func TestStreamRelay_ClientGoneAndCancel(t *testing.T) {
	tools := newRelayTools()
	url, _ := relayReplica(t, tools, nil)
	session := initialize(t, url, "good-key", `{"elicitation":{}}`)
	ctx, cancel := context.WithCancel(context.Background())
	resp := postRPC(t, ctx, url, "good-key", session, callBody)
	relayedRequest(t, bufio.NewReader(resp.Body))
	cancel()
	resp.Body.Close()
	if o := tools.outcome(t); o.err == nil || o.result != nil {
		t.Errorf("Request() = %s, %v after the client went away; want an error", o.result, o.err)
	}

	tools.cancel = make(chan struct{})
	resp = postRPC(t, context.Background(), url, "good-key", session, callBody)
	defer resp.Body.Close()
	stream := bufio.NewReader(resp.Body)
	id := relayedRequest(t, stream)
	close(tools.cancel)
	m := nextMessage(t, stream)
	var p struct {
		RequestID string `json:"requestId"`
	}
	if m.Method != "notifications/cancelled" || json.Unmarshal(m.Params, &p) != nil || p.RequestID != id {
		t.Errorf("after the relay's context ended the client got %s %s, want notifications/cancelled of %s", m.Method, m.Params, id)
	}
	if o := tools.outcome(t); o.err == nil {
		t.Error("Request() err = nil after its context ended")
	}
}

// Two replicas on one database: the call waits on A, the answer's POST
// reaches B, which stores it sealed; A, told by the notification, takes
// it. A forged answer stored by B under another caller is not taken.
func TestStreamRelay_AnswerOnAnotherReplica(t *testing.T) {
	db := storetest.Open(t)
	toolsA, toolsB := newRelayTools(), newRelayTools()
	urlA, gA := relayReplica(t, toolsA, db)
	urlB, _ := relayReplica(t, toolsB, db)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	stored := make(chan string, 4)
	go db.Listen(ctx, slog.New(slog.DiscardHandler), ready, func(inv store.Invalidation) {
		if inv.Kind == store.InvalidateRelayAnswer {
			stored <- inv.ID
			gA.RelayAnswerStored(inv.WorkspaceID, inv.ID)
		}
	}, nil)
	<-ready
	session := initialize(t, urlA, "good-key", `{"elicitation":{}}`)
	resp := postRPC(t, context.Background(), urlA, "good-key", session, callBody)
	defer resp.Body.Close()
	stream := bufio.NewReader(resp.Body)
	id := relayedRequest(t, stream)
	if code := postAnswer(t, urlB, "second-key", "", answerBody(id, "mallory")); code != http.StatusAccepted {
		t.Errorf("forged answer on B: status %d", code)
	}
	if code := postAnswer(t, urlB, "good-key", session, answerBody(id, "ada")); code != http.StatusAccepted {
		t.Errorf("answer on B: status %d", code)
	}
	o := toolsA.outcome(t)
	if o.err != nil || !strings.Contains(string(o.result), `"ada"`) {
		t.Fatalf("Request() on A = %s, %v; want the answer given to B (ada)", o.result, o.err)
	}
	readUntilResponse(t, stream)
	var n int
	var plain bool
	if err := db.Pool.QueryRow(ctx, `SELECT count(*), coalesce(bool_or(position('mallory'::bytea in answer) > 0), false)
		FROM relay_answers`).Scan(&n, &plain); err != nil {
		t.Fatal(err)
	}
	if n != 1 || plain {
		t.Errorf("rows left = %d (want the forged one only), readable = %v (want sealed)", n, plain)
	}
}

// At 2026-07-28 there are no sessions and no requests on the stream: the
// relay retries its input, has the capabilities of the call's _meta, and
// a Request that holds the call (heldcall.go) for a caller that declared
// any.
func TestStreamRelay_NewProtocol(t *testing.T) {
	tools := newRelayTools()
	tools.capsOnly = true
	url, _ := relayReplica(t, tools, nil)
	newProtocolCall(t, url, "good-key", `{"elicitation":{"url":{}},"sampling":{}}`, "")
	o := tools.outcome(t)
	if o.relay.Request == nil || !o.relay.InputRetry {
		t.Errorf("Relay = Request %v, InputRetry %v; want the held call's, true", o.relay.Request != nil, o.relay.InputRetry)
	}
	if want := (mcpgate.ClientCapabilities{ElicitationURL: true, Sampling: true}); o.relay.Capabilities != want {
		t.Errorf("Capabilities = %+v, want %+v", o.relay.Capabilities, want)
	}
}

// A call answered as JSON, not as an event stream, cannot carry a
// request: the relay says so and knows no capabilities.
func TestStreamRelay_JSONResponseCannotCarry(t *testing.T) {
	g := New(Options{ConfirmationSecret: []byte("serverendpoint-test-secret-0123456789")})
	defer g.Close()
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "application/json")
	r := httptest.NewRequest(http.MethodPost, "/mcp/docs", nil)
	a := &mcpgate.Actor{UserID: "u1", WorkspaceID: "w1", KeyID: "k1"}
	sw := g.newStreamWriter(rec, r, a, "docs", streamSession{caps: mcpgate.ClientCapabilities{ElicitationForm: true}})
	defer sw.close()
	var relay mcpgate.Relay
	streamRelay(withStreamWriter(context.Background(), sw), &relay)
	if relay.Capabilities != (mcpgate.ClientCapabilities{}) || relay.Request == nil {
		t.Fatalf("Relay = %+v, want a Request and no capabilities", relay)
	}
	if _, err := relay.Request(context.Background(), mcpgate.ClientRequest{Method: mcpgate.MethodListRoots}); err == nil ||
		!strings.Contains(err.Error(), "cannot carry requests") {
		t.Errorf("Request() err = %v, want the stream cannot carry requests", err)
	}
	if rec.Body.Len() != 0 {
		t.Errorf("wrote %q on a JSON response", rec.Body.String())
	}
}

// On a server of person scope a forged session id is refused as on one
// of client scope (404: initialize again).
func TestStreamRelay_ForgedSessionPersonScope(t *testing.T) {
	url, _ := relayReplica(t, newRelayTools(), nil)
	resp := postRPC(t, context.Background(), url, "good-key", "mcs1.forged.x", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status = %d, want 404", resp.StatusCode)
	}
}
