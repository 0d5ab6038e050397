package mcp

// Requests of an upstream server to its client, relayed to the caller of
// a tool call on a server's endpoint at the 2025 protocols (Relay.Request).
//
// The endpoint is go-sdk's stateless handler, which refuses to send a
// request itself; so the gateway writes the request as one SSE event on
// the tools/call's own response stream (streamWriter: every write to the
// stream, go-sdk's and the relay's, takes one mutex, and go-sdk writes
// one complete event per Write). The request's id is the gateway's own,
// unguessable ("mcpgate-r-" and 128 random bits). The client answers with
// a POST of a JSON-RPC response to the same endpoint, which ServerHandler
// takes before go-sdk (takeRelayAnswers): an answer is delivered only to
// the call whose relay id it names and only when it comes from the same
// workspace, credential, person, server and client session (the sealed
// Mcp-Session-Id) the request was sent to; anything else is answered as
// go-sdk answers a response it has no request for (202 Accepted, empty)
// and delivered nowhere, so that no one learns whether an id is in use.
// A relay is answered once.
//
// The answer's POST may reach another replica than the one holding the
// call: that replica, finding no waiter of its own, seals the answer
// (AES-GCM under a key derived from the confirmation secret, the binding
// in its additional data) and stores it (RelayAnswers, Postgres), which
// tells every replica; the waiting one takes it (read and delete), on the
// notification or on its poll, should a notification be lost.

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate"
)

// RelayAnswers carries a client's answer to a relayed request from the
// replica its POST reached to the one whose call waits for it (Postgres:
// internal/store's relay_answers). id is the SHA-256 of the relay id and
// binding the HMAC of the caller it was issued to; the answer comes
// sealed. Put tells every replica, which call Gateway.RelayAnswerStored.
type RelayAnswers interface {
	PutRelayAnswer(ctx context.Context, workspaceID, id, binding string, sealed []byte) error
	TakeRelayAnswer(ctx context.Context, id, binding string) (sealed []byte, ok bool, err error)
}

const (
	relayIDPrefix = "mcpgate-r-"
	// maxRelayWait caps a relayed request's wait, whatever the call's
	// deadline (the tool service sets it).
	maxRelayWait = 10 * time.Minute
	// relayPoll is how often a waiting call looks in the store for its
	// answer, should the notification have been lost.
	relayPoll = 5 * time.Second
)

// errNoRequestStream is Request's answer when the call's response is not
// an SSE stream, which cannot carry a request.
var errNoRequestStream = mcpgate.Errorf(mcpgate.EUnavailable,
	"the client's stream cannot carry requests (its tool call is answered as JSON, not as an event stream)")

// streamWriter is the response writer of one request to a server's
// endpoint: go-sdk's writes and the relay's events take turns under one
// mutex, each a complete event.
type streamWriter struct {
	g      *Gateway
	mu     sync.Mutex
	w      http.ResponseWriter
	closed bool
	// gone ends when the request's context does (the client went away)
	// or the handler returned.
	gone  <-chan struct{}
	a     *mcpgate.Actor
	bind  string
	sess  streamSession
	close func()
}

func (g *Gateway) newStreamWriter(w http.ResponseWriter, r *http.Request, a *mcpgate.Actor, server string, s streamSession) *streamWriter {
	ctx, cancel := context.WithCancel(r.Context())
	sw := &streamWriter{g: g, w: w, gone: ctx.Done(), a: a, bind: g.relayBinding(a, server, s.id), sess: s}
	sw.close = func() {
		sw.mu.Lock()
		sw.closed = true
		sw.mu.Unlock()
		cancel()
	}
	return sw
}

func (s *streamWriter) Header() http.Header { return s.w.Header() }

func (s *streamWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *streamWriter) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w.WriteHeader(code)
}

// FlushError is what http.ResponseController calls (go-sdk's flush).
func (s *streamWriter) FlushError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return http.NewResponseController(s.w).Flush()
}

func (s *streamWriter) Flush() { _ = s.FlushError() }

// Unwrap gives http.ResponseController the writer below (deadlines).
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.w }

// sse reports whether the response is an event stream.
func (s *streamWriter) sse() bool {
	ct := s.w.Header().Get("Content-Type")
	return strings.HasPrefix(ct, "text/event-stream")
}

// event writes one message as a complete SSE event and flushes it.
func (s *streamWriter) event(msg any) error {
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("the call's stream has ended")
	}
	if !s.sse() {
		return errNoRequestStream
	}
	b := make([]byte, 0, len(data)+len("event: message\ndata: \n\n"))
	b = append(append(append(b, "event: message\ndata: "...), data...), "\n\n"...)
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return http.NewResponseController(s.w).Flush()
}

type streamWriterKey struct{}

func withStreamWriter(ctx context.Context, s *streamWriter) context.Context {
	return context.WithValue(ctx, streamWriterKey{}, s)
}

func streamWriterFrom(ctx context.Context) *streamWriter {
	s, _ := ctx.Value(streamWriterKey{}).(*streamWriter)
	return s
}

// relayBinding is the HMAC of who a relay was issued to.
func (g *Gateway) relayBinding(a *mcpgate.Actor, server, session string) string {
	m := hmac.New(sha256.New, g.opts.ConfirmationSecret)
	m.Write([]byte("mcpgate relay binding v1\x00"))
	for _, f := range []string{a.WorkspaceID, a.CredentialID(), a.UserID, server, session} {
		m.Write([]byte(f))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// relayKeyOf is the name a relay id is kept and stored under.
func relayKeyOf(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

func newRelayID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return relayIDPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// relayWaits are this replica's calls waiting for a client's answer, by
// relay key.
type relayWaits struct {
	mu sync.Mutex
	m  map[string]*relayWaiter
}

type relayWaiter struct {
	bind   string
	answer chan json.RawMessage // the JSON-RPC response, once
	poke   chan struct{}        // look in the store
}

func (rw *relayWaits) add(key, bind string) *relayWaiter {
	w := &relayWaiter{bind: bind, answer: make(chan json.RawMessage, 1), poke: make(chan struct{}, 1)}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.m == nil {
		rw.m = map[string]*relayWaiter{}
	}
	rw.m[key] = w
	return w
}

// remove forgets w, the waiter of key, unless another took its place (a
// second request waiting for the same thing): that one stays.
func (rw *relayWaits) remove(key string, w *relayWaiter) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.m[key] == w {
		delete(rw.m, key)
	}
}

// deliver hands an answer to the local waiter of key: local says whether
// there is one, delivered whether it took the answer (the same caller).
func (rw *relayWaits) deliver(key, bind string, answer json.RawMessage) (local, delivered bool) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	w, ok := rw.m[key]
	if !ok {
		return false, false
	}
	if !hmac.Equal([]byte(w.bind), []byte(bind)) {
		return true, false
	}
	delete(rw.m, key) // single use
	w.answer <- answer
	return true, true
}

func (rw *relayWaits) pokeAll(key string) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	for k, w := range rw.m {
		if key == "" || k == key {
			select {
			case w.poke <- struct{}{}:
			default:
			}
		}
	}
}

// RelayAnswerStored tells the calls waiting on this replica that the
// answer of relay key id was stored by another (store.InvalidateRelayAnswer);
// an empty id (notifications may have been missed) tells them all.
func (g *Gateway) RelayAnswerStored(workspaceID, id string) { g.relays.pokeAll(id) }

// streamRelay sets Request and Capabilities of a call on a server's
// endpoint at a 2025 protocol, whose stream the handler put in ctx.
func streamRelay(ctx context.Context, r *mcpgate.Relay) {
	sw := streamWriterFrom(ctx)
	if sw == nil {
		return
	}
	if sw.sse() {
		r.Capabilities = sw.sess.caps
	}
	r.Request = func(ctx context.Context, req mcpgate.ClientRequest) (json.RawMessage, error) {
		return sw.g.relayRequest(ctx, sw, req)
	}
}

// relayRequest sends req on the call's stream and waits for the client's
// answer, the context's end (then the client is told the request is
// cancelled) or the client going away.
func (g *Gateway) relayRequest(ctx context.Context, sw *streamWriter, req mcpgate.ClientRequest) (json.RawMessage, error) {
	if !sw.sse() {
		return nil, errNoRequestStream
	}
	id := newRelayID()
	key := relayKeyOf(id)
	w := g.relays.add(key, sw.bind)
	defer g.relays.remove(key, w)
	msg := map[string]any{"jsonrpc": "2.0", "id": id, "method": req.Method}
	if len(req.Params) > 0 {
		msg["params"] = req.Params
	}
	if err := sw.event(msg); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, maxRelayWait)
	defer cancel()
	answer, err := g.awaitRelayed(ctx, sw.a, w, key, sw.bind, sw.gone)
	switch {
	case errors.Is(err, errRelayGone):
		return nil, mcpgate.Errorf(mcpgate.EUnavailable, "the client's stream ended before it answered the request")
	case err != nil:
		_ = sw.event(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
			"params": map[string]any{"requestId": id, "reason": "the tool call no longer waits for the answer"}})
		return nil, err
	}
	return readRelayAnswer(answer)
}

// errRelayGone is awaitRelayed's answer when gone ended first.
var errRelayGone = errors.New("the waiter's client went away")

// awaitRelayed waits for what w (registered under key and bind) is
// delivered: here, or stored by another replica (taken when told, or at
// the poll); until ctx ends (its error) or gone does (errRelayGone).
func (g *Gateway) awaitRelayed(ctx context.Context, a *mcpgate.Actor, w *relayWaiter, key, bind string, gone <-chan struct{}) (json.RawMessage, error) {
	var poll <-chan time.Time
	if g.opts.RelayAnswers != nil {
		t := time.NewTicker(relayPoll)
		defer t.Stop()
		poll = t.C
	}
	for {
		var got json.RawMessage
		select {
		case got = <-w.answer:
		case <-w.poke:
			got = g.takeStored(ctx, a, key, bind)
		case <-poll:
			got = g.takeStored(ctx, a, key, bind)
		case <-gone:
			return nil, errRelayGone
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if got != nil {
			return got, nil
		}
	}
}

// deliverRelayed hands msg to the waiter of key and bind: here if it
// waits here, else sealed through the store to whichever replica it waits
// on. It reports false when it could not be handed on.
func (g *Gateway) deliverRelayed(ctx context.Context, a *mcpgate.Actor, key, bind string, msg json.RawMessage) bool {
	if local, delivered := g.relays.deliver(key, bind, msg); local || g.opts.RelayAnswers == nil {
		return delivered
	}
	sealed, err := g.relayAEAD(key, bind, msg, true)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = g.opts.RelayAnswers.PutRelayAnswer(ctx, a.WorkspaceID, key, bind, sealed)
		cancel()
	}
	if err != nil {
		g.log.WarnContext(ctx, "store relay answer", "workspace_id", a.WorkspaceID, "err", err)
		return false
	}
	return true
}

// takeStored takes the call's answer from the store, nil when there is
// none (yet) or it cannot be read.
func (g *Gateway) takeStored(ctx context.Context, a *mcpgate.Actor, key, bind string) json.RawMessage {
	sealed, ok, err := g.opts.RelayAnswers.TakeRelayAnswer(ctx, key, bind)
	if err != nil {
		if ctx.Err() == nil {
			g.log.WarnContext(ctx, "take relay answer", "workspace_id", a.WorkspaceID, "err", err)
		}
		return nil
	}
	if !ok {
		return nil
	}
	answer, err := g.relayAEAD(key, bind, sealed, false)
	if err != nil {
		g.log.WarnContext(ctx, "open relay answer", "workspace_id", a.WorkspaceID, "err", err)
		return nil
	}
	return answer
}

// relayAEAD seals (open false: seals in) or opens a stored answer under
// the key derived from the confirmation secret, the relay key and
// binding as additional data.
func (g *Gateway) relayAEAD(key, bind string, in []byte, seal bool) ([]byte, error) {
	m := hmac.New(sha256.New, g.opts.ConfirmationSecret)
	m.Write([]byte("mcpgate relay answer v1"))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	ad := []byte(key + "\x00" + bind)
	if seal {
		nonce := make([]byte, aead.NonceSize())
		_, _ = rand.Read(nonce)
		return aead.Seal(nonce, nonce, in, ad), nil
	}
	if len(in) < aead.NonceSize() {
		return nil, errors.New("sealed answer too short")
	}
	return aead.Open(nil, in[:aead.NonceSize()], in[aead.NonceSize():], ad)
}

// relayResponse is a JSON-RPC response as a client answers a relay.
type relayResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// relayID returns the relay id a response answers, "" if it is not a
// response to one of the gateway's relays.
func (m *relayResponse) relayID() string {
	var id string
	if m.Method != nil || (m.Result == nil && m.Error == nil) || json.Unmarshal(m.ID, &id) != nil ||
		!strings.HasPrefix(id, relayIDPrefix) {
		return ""
	}
	return id
}

// readRelayAnswer reads the client's response: its result, raw, or its
// error as *mcpgate.ClientRPCError.
func readRelayAnswer(answer json.RawMessage) (json.RawMessage, error) {
	var m relayResponse
	if err := json.Unmarshal(answer, &m); err != nil {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "the client's answer could not be read")
	}
	if m.Error != nil {
		return nil, &mcpgate.ClientRPCError{Code: m.Error.Code, Message: m.Error.Message, Data: m.Error.Data}
	}
	return m.Result, nil
}

// takeRelayAnswers answers a POST whose body is a client's answers to
// relayed requests (one response, or a batch of nothing else): each is
// delivered to its call, here or, through the store, on another replica,
// when it comes from the caller the relay was sent to, and dropped
// otherwise; the POST is answered 202 Accepted either way, as go-sdk
// answers responses (it has none of these ids). An answer for another
// replica is stored only within the caller's bucket of relayed lists
// (limitRelayList). It reports false, and writes nothing, for any other
// body.
func (g *Gateway) takeRelayAnswers(w http.ResponseWriter, r *http.Request, a *mcpgate.Actor, server string, body []byte) bool {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Protocol-Version") == newProtocol {
		return false
	}
	raws := []json.RawMessage{body}
	if trimmed := strings.TrimLeft(string(body), " \t\r\n"); strings.HasPrefix(trimmed, "[") {
		// go-sdk takes batches only before 2025-06-18 (an absent header
		// is 2025-03-26), and answers the others itself.
		if v := r.Header.Get("Mcp-Protocol-Version"); v >= "2025-06-18" ||
			json.Unmarshal(body, &raws) != nil || len(raws) == 0 {
			return false
		}
	}
	ids := make([]string, len(raws))
	for i, raw := range raws {
		var m relayResponse
		if json.Unmarshal(raw, &m) != nil {
			return false
		}
		if ids[i] = m.relayID(); ids[i] == "" {
			return false
		}
	}
	var session string
	if token := r.Header.Get("Mcp-Session-Id"); token != "" {
		s, ok := g.verifySession(token, a, server)
		if !ok || g.ended.has(s.id) {
			w.WriteHeader(http.StatusAccepted) // as for an unknown id: nothing delivered
			return true
		}
		session = s.id
	}
	bind := g.relayBinding(a, server, session)
	for i, raw := range raws {
		key := relayKeyOf(ids[i])
		if local, _ := g.relays.deliver(key, bind, raw); local || g.opts.RelayAnswers == nil {
			continue
		}
		// Each stored answer is a database write, for ids this replica
		// cannot tell from made-up ones: bounded as the relayed lists are,
		// far above what answering elicitations takes.
		if g.limitRelayList(a, server) != nil {
			continue
		}
		g.deliverRelayed(r.Context(), a, key, bind, raw)
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}
