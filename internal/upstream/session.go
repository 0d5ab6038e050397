package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

// Target is one upstream server as the gateway reaches it: its URL and the
// headers that carry its credential (none, or e.g. Authorization or
// X-API-Key). These headers are the only ones sent besides the protocol's
// own; no header of the gateway's own caller ever is.
type Target struct {
	URL     string
	Headers map[string]mcpgate.Secret
	// Capabilities are the server-to-client requests the gateway's
	// sessions to this target declare (and relay to the caller through
	// CallRequest.OnRequest); part of the fingerprint, so that sessions
	// declaring different capabilities are never mixed. The zero value
	// declares none.
	Capabilities Capabilities
}

// Capabilities are what a session declares it answers for its server.
type Capabilities struct {
	mcpgate.ClientCapabilities
	// PassInputRequests: on a 2026-07-28 session, an input_required result
	// is returned to the caller as it came (go-sdk's client would
	// otherwise answer it itself through the handlers and retry).
	PassInputRequests bool
}

// protocolHeaders may not be set as credentials: the transport sets them.
var protocolHeaders = map[string]bool{
	"Accept": true, "Content-Type": true, "Content-Length": true, "Host": true, "Connection": true,
	"Transfer-Encoding": true, "Last-Event-Id": true, "Upgrade": true, "Te": true, "Trailer": true,
	"Keep-Alive": true, "Proxy-Authorization": true, "Proxy-Connection": true,
}

// ValidateHeaders refuses credential headers that are not valid HTTP
// header fields or that would stand in for the protocol's own. Its errors
// name the header, never the value.
func ValidateHeaders(h map[string]mcpgate.Secret) error {
	for name, v := range h {
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if name == "" || strings.ContainsAny(name, " \t\r\n:") || !validToken(name) {
			return fmt.Errorf("header name %q is not a valid HTTP header name", name)
		}
		if protocolHeaders[canon] || strings.HasPrefix(canon, "Mcp-") {
			return fmt.Errorf("header %q is set by the protocol and cannot carry a credential", name)
		}
		if strings.ContainsAny(v.Reveal(), "\r\n\x00") {
			return fmt.Errorf("the value of header %q holds a line break", name)
		}
	}
	return nil
}

func validToken(s string) bool {
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// probe records what the last HTTP exchange of a request looked like, so
// an error can say why (the SDK's errors name only a status text).
type probe struct {
	mu          sync.Mutex
	status      int
	contentType string
	challenge   string
	answered    bool // a JSON-RPC answer arrived
}

func (p *probe) saw(resp *http.Response) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status, p.contentType = resp.StatusCode, resp.Header.Get("Content-Type")
	p.challenge = resp.Header.Get("WWW-Authenticate")
}

func (p *probe) sawAnswer() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answered = true
}

func (p *probe) snapshot() (status int, contentType, challenge string, answered bool) {
	if p == nil {
		return 0, "", "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status, p.contentType, p.challenge, p.answered
}

// budget is the bytes one request may still read from the upstream; past
// it the request's context is cancelled with errTooLarge, which stops the
// SDK's reader and sends the upstream notifications/cancelled.
type budget struct {
	remaining atomic.Int64
	cancel    context.CancelCauseFunc
}

var (
	errTooLarge = errors.New("answer larger than the byte cap")
	errIdle     = errors.New("no progress within the idle timeout")
	errAbsolute = errors.New("call timeout")
)

type cappedBody struct {
	io.ReadCloser
	b *budget
}

func (c *cappedBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if c.b.remaining.Add(-int64(n)) < 0 {
		c.b.cancel(errTooLarge)
		return 0, errTooLarge
	}
	return n, err
}

// requestValues are what one request hands down to the transport through
// its context: the SDK passes the caller's context to the HTTP request and
// to the connection's Write.
type requestValues struct {
	probe  *probe
	budget *budget
	slot   *rawSlot
}

type requestValuesKey struct{}

func withRequestValues(ctx context.Context, v *requestValues) context.Context {
	return context.WithValue(ctx, requestValuesKey{}, v)
}

func requestValuesFrom(ctx context.Context) *requestValues {
	v, _ := ctx.Value(requestValuesKey{}).(*requestValues)
	if v == nil {
		return &requestValues{}
	}
	return v
}

// hopTransport is the last word on what leaves for the upstream: it keeps
// only the protocol's own headers of the SDK's request, adds the target's
// credential headers and the negotiated protocol version, and caps what
// each answer may read.
type hopTransport struct {
	base    http.RoundTripper
	headers map[string]mcpgate.Secret
	state   *sessionState
}

// keptHeader lists the SDK's headers that go out; everything else is
// dropped, so nothing the gateway did not choose can reach the upstream.
func keptHeader(canon string) bool {
	switch canon {
	case "Accept", "Content-Type", "Last-Event-Id":
		return true
	}
	return strings.HasPrefix(canon, "Mcp-")
}

func (h *hopTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	out.Header = http.Header{}
	for name, vs := range r.Header {
		if keptHeader(textproto.CanonicalMIMEHeaderKey(name)) {
			out.Header[name] = vs
		}
	}
	out.Header.Set("User-Agent", "mcpgate")
	// The negotiated version wins over the SDK's: lacking the session's
	// own (hidden from it, see rawConn), the SDK takes the version from the
	// request's context, where go-sdk's server put the calling client's.
	if v := h.state.version(); v != "" {
		out.Header.Set("Mcp-Protocol-Version", v)
	}
	for name, v := range h.headers {
		out.Header.Set(name, v.Reveal())
	}
	vals := requestValuesFrom(r.Context())
	release := func() {}
	if cc := h.state.closeContext(); r.Method == http.MethodDelete && cc != nil {
		ctx, cancel := context.WithCancel(out.Context())
		stop := context.AfterFunc(cc, cancel)
		if cc.Err() != nil {
			cancel() // ended already: not left to AfterFunc's goroutine
		}
		out = out.WithContext(ctx)
		release = func() { stop(); cancel() }
	}
	resp, err := h.base.RoundTrip(out)
	if err != nil {
		release()
		return nil, err
	}
	if r.Method == http.MethodDelete {
		resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
	}
	vals.probe.saw(resp)
	b := vals.budget
	if r.Method != http.MethodPost || b == nil {
		b = &budget{cancel: func(error) {}}
		b.remaining.Store(64 << 10)
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, b: b}
	return resp, nil
}

// releasingBody calls release once the body is closed.
type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

// sessionState is what the connection learns and the transport needs.
type sessionState struct {
	mu         sync.Mutex
	negotiated string
	// closing bounds the session's closing DELETE, when its closer set one.
	closing context.Context
	// call is the tool call on the session, which holds it alone (see
	// Pool.acquire): the call every log message of the session belongs to.
	call *callState
}

// setCall makes c the session's call (nil: none).
func (s *sessionState) setCall(c *callState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.call = c
}

// currentCall is the call a log message of the session belongs to, or nil.
// A log message names no request (the SDK's client merges the streams of
// all requests into one); since a session carries one call or relay at a
// time, a message that arrives while a call holds it is that call's, and
// one that arrives outside a call (during a relay, or after the answer)
// belongs to no call.
func (s *sessionState) currentCall() *callState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.call
}

func (s *sessionState) setCloseContext(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = ctx
}

func (s *sessionState) closeContext() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

func (s *sessionState) version() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.negotiated
}

func (s *sessionState) setVersion(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.negotiated = v
}

// rawSlot receives, per method, the answer the upstream gave to the
// requests sent under one context, as raw JSON: the SDK's typed results
// lose what it does not model (a missing readOnlyHint reads as false,
// unknown content types fail to decode), and a gateway must relay the
// upstream's answer as it was.
type rawSlot struct {
	mu      sync.Mutex
	answers map[string]*jsonrpc.Response
	ids     []jsonrpc.ID
}

func (s *rawSlot) put(method string, r *jsonrpc.Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answers == nil {
		s.answers = map[string]*jsonrpc.Response{}
	}
	s.answers[method] = r
}

// answer returns the upstream's answer to method: its raw result, or its
// JSON-RPC error.
func (s *rawSlot) answer(method string) (json.RawMessage, *jsonrpc.Error, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.answers[method]
	if !ok {
		return nil, nil, false
	}
	if r.Error != nil {
		var w *jsonrpc.Error
		if errors.As(r.Error, &w) {
			return nil, w, true
		}
		return nil, nil, false // the SDK's own synthetic error: no answer
	}
	return r.Result, nil, true
}

// rawTransport wraps the SDK's streamable transport so that its connection
// hands each JSON-RPC answer's raw bytes to the rawSlot of the request.
type rawTransport struct {
	inner mcp.Transport
	state *sessionState
	conn  *rawConn
}

func (t *rawTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.conn = &rawConn{Connection: c, state: t.state, pending: map[jsonrpc.ID]pendingCall{}}
	return t.conn, nil
}

type pendingCall struct {
	method string
	vals   *requestValues
}

// rawConn is the SDK's connection with the answers' raw results captured.
// It hides the SDK's unexported session-update hook, whose one use on
// this path (with the standalone stream off) is the protocol-version
// header; the connection learns the version from the initialize answer
// and hopTransport sets the header instead.
type rawConn struct {
	mcp.Connection
	state   *sessionState
	mu      sync.Mutex
	pending map[jsonrpc.ID]pendingCall
}

func (c *rawConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	req, ok := msg.(*jsonrpc.Request)
	if ok && req.IsCall() {
		vals := requestValuesFrom(ctx)
		c.mu.Lock()
		c.pending[req.ID] = pendingCall{method: req.Method, vals: vals}
		c.mu.Unlock()
		if vals.slot != nil {
			vals.slot.mu.Lock()
			vals.slot.ids = append(vals.slot.ids, req.ID)
			vals.slot.mu.Unlock()
		}
	}
	err := c.Connection.Write(ctx, msg)
	if err != nil && ok && req.IsCall() {
		c.forget(req.ID)
	}
	return err
}

func (c *rawConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); err == nil && ok && !req.IsCall() && req.Method == methodLogMessage {
		// Read here, not in the SDK's logging handler: that one gets the
		// params decoded, and the message's data must pass as it came.
		if call := c.state.currentCall(); call != nil {
			call.logged(req.Params)
		}
		return msg, nil
	}
	resp, ok := msg.(*jsonrpc.Response)
	if err != nil || !ok {
		return msg, err
	}
	c.mu.Lock()
	call, found := c.pending[resp.ID]
	delete(c.pending, resp.ID)
	c.mu.Unlock()
	if !found {
		return msg, nil
	}
	var w *jsonrpc.Error
	if resp.Error == nil || errors.As(resp.Error, &w) {
		call.vals.probe.sawAnswer()
	}
	if call.method == "initialize" && resp.Error == nil {
		var init struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(resp.Result, &init) == nil {
			c.state.setVersion(init.ProtocolVersion)
		}
	}
	if call.vals.slot != nil {
		call.vals.slot.put(call.method, &jsonrpc.Response{ID: resp.ID, Result: bytes.Clone(resp.Result), Error: resp.Error})
	}
	return msg, nil
}

// forget drops the pending entries of requests that will not be answered
// (cancelled, or failed to send).
func (c *rawConn) forget(ids ...jsonrpc.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		delete(c.pending, id)
	}
}
