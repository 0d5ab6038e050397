package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// opsBus is StreamOps as Postgres and the invalidation channel are: rows
// in memory, and every write told to every replica.
type opsBus struct {
	mu       sync.Mutex
	seq      int
	rows     map[string]*opRow
	replicas []*Gateway
	put      chan string // the binding of each operation stored
}

type opRow struct {
	seq         int
	ws, binding string
	operation   []byte
	claimed     bool
	answer      []byte
}

func (b *opsBus) all() []*Gateway {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.replicas)
}

func (b *opsBus) PutStreamOp(_ context.Context, ws, id, binding string, op []byte) error {
	b.mu.Lock()
	b.seq++
	b.rows[id] = &opRow{seq: b.seq, ws: ws, binding: binding, operation: op}
	b.mu.Unlock()
	b.put <- binding
	for _, g := range b.all() {
		g.StreamOpStored(ws, binding)
	}
	return nil
}

func (b *opsBus) ClaimStreamOps(_ context.Context, binding string, each func(string, []byte)) error {
	b.mu.Lock()
	var ids []string
	for id, r := range b.rows {
		if r.binding == binding && !r.claimed {
			r.claimed = true
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(x, y string) int { return b.rows[x].seq - b.rows[y].seq })
	ops := make([][]byte, len(ids))
	for i, id := range ids {
		ops[i] = b.rows[id].operation
	}
	b.mu.Unlock()
	for i, id := range ids {
		each(id, ops[i])
	}
	return nil
}

func (b *opsBus) AnswerStreamOp(_ context.Context, ws, id string, answer []byte) error {
	b.mu.Lock()
	r := b.rows[id]
	if r == nil || !r.claimed {
		b.mu.Unlock()
		return nil
	}
	r.answer = answer
	b.mu.Unlock()
	for _, g := range b.all() {
		g.StreamOpAnswered(ws, id)
	}
	return nil
}

func (b *opsBus) TakeStreamOpAnswer(_ context.Context, id string) ([]byte, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.rows[id]
	if r == nil || r.answer == nil {
		return nil, false, nil
	}
	delete(b.rows, id)
	return r.answer, true, nil
}

func (b *opsBus) WithdrawStreamOp(_ context.Context, id string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.rows[id]
	if r == nil || r.claimed {
		return false, nil
	}
	delete(b.rows, id)
	return true, nil
}

// opsReplica is one replica of a two-replica gateway sharing bus.
type opsReplica struct {
	g   *Gateway
	eps *subscribingEndpoints
	url string
}

func newOpsReplica(t *testing.T, bus *opsBus) *opsReplica {
	t.Helper()
	eps := &subscribingEndpoints{fakeEndpoints: fakeEndpoints{EndpointFn: func(string) (*mcpgate.ServerEndpoint, error) {
		return docsEndpoint(), nil
	}}}
	g := New(Options{Tools: &fakeTools{set: &mcpgate.ToolSet{All: map[string]mcpgate.ToolInfo{}}}, Registry: connectors.NewRegistry(),
		Authenticators: []mcpgate.Authenticator{peopleAuth{}}, PublicURL: "http://gateway.test",
		ConfirmationSecret: []byte("serverendpoint-test-secret-0123456789"), StreamOps: bus})
	t.Cleanup(g.Close)
	g.push.streamWait = 300 * time.Millisecond
	mux := http.NewServeMux()
	mux.Handle("/mcp/{server}", g.ServerHandler(eps))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	bus.mu.Lock()
	bus.replicas = append(bus.replicas, g)
	bus.mu.Unlock()
	return &opsReplica{g: g, eps: eps, url: srv.URL + "/mcp/docs"}
}

// openSessionStream opens the standalone stream of session on url and
// returns its reader, past the opening.
func openSessionStream(t *testing.T, url, key, session string) *bufio.Reader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req := streamRequest(ctx, url, key, "2025-11-25")
	req.Header.Set("Mcp-Session-Id", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream status %d", resp.StatusCode)
	}
	return bufio.NewReader(resp.Body)
}

// rpcError returns the JSON-RPC error message of a POST's answer, "" for
// a result.
func rpcErrorOf(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var m struct {
		Error *struct{ Message string } `json:"error"`
	}
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok && data != "" {
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatal(err)
			}
			break
		}
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
	}
	if m.Error != nil {
		return m.Error.Message
	}
	return ""
}

// A 2025 resources/subscribe or unsubscribe that reaches another replica
// than the one holding the client session's standalone stream is made on
// that one, and answered from it: the upstream session is the stream's
// replica's, and the update reaches the stream. One sent before the
// stream opens is made when it does; one for a session whose stream is
// open nowhere is refused (an unsubscribe agreed), and a subscription is
// the session's: another session of the same key, on the same replica,
// hears nothing of it.
func TestSubscriptions_ForwardedToTheStreamsReplica(t *testing.T) {
	bus := &opsBus{rows: map[string]*opRow{}, put: make(chan string, 16)}
	a, b := newOpsReplica(t, bus), newOpsReplica(t, bus)
	ctx := context.Background()
	subscribe := func(url, session, method, uri string) string {
		return rpcErrorOf(t, postRPC(t, ctx, url, "alice-key", session,
			`{"jsonrpc":"2.0","id":5,"method":"`+method+`","params":{"uri":"`+uri+`"}}`))
	}

	session := initialize(t, b.url, "alice-key", `{}`)
	stream := openSessionStream(t, a.url, "alice-key", session)
	other := initialize(t, a.url, "alice-key", `{}`)
	otherStream := openSessionStream(t, a.url, "alice-key", other)
	if msg := subscribe(b.url, session, "resources/subscribe", "file:///a"); msg != "" {
		t.Fatalf("subscribe through replica B: %s", msg)
	}
	<-bus.put
	up := a.eps.session("w1/alice")
	if up == nil || b.eps.session("w1/alice") != nil {
		t.Fatal("the upstream session is not replica A's, which holds the stream")
	}
	a.eps.state(func() {
		if !slices.Equal(up.subscribed, []string{"file:///a"}) {
			t.Errorf("subscribed upstream = %q", up.subscribed)
		}
	})
	up.updated("file:///a")
	if m := nextMessage(t, stream); m.Method != notificationResourceUpdated || !strings.Contains(string(m.Params), "file:///a") {
		t.Errorf("the stream was told %s %s, want the update", m.Method, m.Params)
	}
	otherGot := make(chan string, 16)
	go func() { // no t here: it reads until the stream ends, after the test
		for {
			line, err := otherStream.ReadString('\n')
			if err != nil {
				return
			}
			otherGot <- line
		}
	}()
	up.updated("file:///a")
	if m := nextMessage(t, stream); m.Method != notificationResourceUpdated {
		t.Errorf("the stream was told %s, want the second update", m.Method)
	}
	deadline := time.After(100 * time.Millisecond)
	for waiting := true; waiting; {
		select {
		case line := <-otherGot:
			if strings.Contains(line, notificationResourceUpdated) {
				t.Errorf("another session of the key was told the update: %s", line)
			}
		case <-deadline:
			waiting = false
		}
	}

	if msg := subscribe(b.url, session, "resources/unsubscribe", "file:///a"); msg != "" {
		t.Fatalf("unsubscribe through replica B: %s", msg)
	}
	<-bus.put
	a.eps.state(func() {
		if !slices.Equal(up.unsubbed, []string{"file:///a"}) || !up.closed {
			t.Errorf("unsubscribed upstream = %q, closed %v; want file:///a and the session closed", up.unsubbed, up.closed)
		}
	})

	// Before the stream opens: the subscribe waits for it.
	late := initialize(t, b.url, "alice-key", `{}`)
	answered := make(chan string, 1)
	b.g.push.streamWait = 10 * time.Second // the claim must come from the stream's opening
	go func() { answered <- subscribe(b.url, late, "resources/subscribe", "file:///late") }()
	<-bus.put
	lateStream := openSessionStream(t, a.url, "alice-key", late)
	if msg := <-answered; msg != "" {
		t.Fatalf("subscribe before the stream opened: %s", msg)
	}
	up = a.eps.session("w1/alice")
	up.updated("file:///late")
	if m := nextMessage(t, lateStream); m.Method != notificationResourceUpdated {
		t.Errorf("the late stream was told %s, want the update", m.Method)
	}

	// No stream of the session anywhere.
	b.g.push.streamWait = 300 * time.Millisecond
	none := initialize(t, b.url, "alice-key", `{}`)
	if msg := subscribe(b.url, none, "resources/subscribe", "file:///b"); !strings.Contains(msg, "notification stream open") {
		t.Errorf("subscribe with no stream anywhere: %q, want it refused", msg)
	}
	if msg := subscribe(b.url, none, "resources/unsubscribe", "file:///b"); msg != "" {
		t.Errorf("unsubscribe with no stream anywhere: %q, want it agreed", msg)
	}
	// Another workspace's person, while alice's streams are open on A:
	// her subscribe finds no stream of hers, and reaches nobody's.
	carol := initialize(t, b.url, "carol-key", `{}`)
	msg := rpcErrorOf(t, postRPC(t, ctx, b.url, "carol-key", carol, `{"jsonrpc":"2.0","id":5,"method":"resources/subscribe","params":{"uri":"file:///c"}}`))
	if !strings.Contains(msg, "notification stream open") {
		t.Errorf("another workspace's subscribe: %q, want it refused", msg)
	}
	if a.eps.session("w2/carol") != nil || b.eps.session("w2/carol") != nil {
		t.Error("another workspace's subscribe opened an upstream session")
	}
	a.eps.state(func() {
		for _, f := range a.eps.sessions {
			if slices.Contains(f.subscribed, "file:///c") {
				t.Errorf("%s's upstream session was subscribed another workspace's URI", f.person)
			}
		}
	})
	bus.mu.Lock()
	left := len(bus.rows)
	bus.mu.Unlock()
	if left != 0 {
		t.Errorf("%d operations left behind", left)
	}
}
