package mcp

// The hot path: tools/call and tools/list answered without go-sdk, for the
// request shapes that carry the load. go-sdk stays the reference: anything
// this file does not recognise exactly (initialize, server/discover,
// prompts, notifications, batches, confirmations and input requests, unknown
// or hidden tools, unusual envelopes, any doubt) is handed to the SDK with
// the body it read, unchanged. The differential test (fastpath_test.go)
// holds both paths to the same answers.
//
// Why: go-sdk v1.8 costs ~12x an HTTP round trip per stateless call: a new
// session per request, its JSON decoder allocating 32 KiB about nine times per request, and log lines per session.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-json-experiment/json/jsontext"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

const (
	// maxBody is the endpoint's request body limit, the same number the SDK
	// handler is given (over it, the SDK answers 413).
	maxBody = 1 << 20
	// sdkMaxDepth is the SDK's JSON nesting limit (internal/json): a deeper
	// body is refused by the SDK, so the fast path must not take it
	// (TestDepthExceeded_MatchesSDK reads the SDK's number).
	sdkMaxDepth = 1000
	// newProtocol is the sessionless protocol generation (SEP-2575): the
	// version and client capabilities travel in each request's _meta, and
	// Mcp-Method/Mcp-Name headers repeat the method and tool.
	newProtocol = "2026-07-28"
)

// legacyVersions are the header values the SDK accepts for the protocols
// before newProtocol, taken from its own list so that a version it drops is
// dropped here too; "" (no header) is what a 2025-03-26 client sends.
var legacyVersions = func() map[string]bool {
	m := map[string]bool{"": true}
	for _, v := range sdk.SupportedProtocolVersions() {
		if v < newProtocol {
			m[v] = true
		}
	}
	return m
}()

// fastTools returns the tools of set that the fast path may call: callable,
// with no approval of any kind (confirmations and approvals run through the
// SDK path, confirm.go and approval.go), with no guard (a guarded call may
// follow a stricter tool's approval, and the service then opens an approval
// request, which must happen once, on the SDK path), and with no Mcp-Param
// headers to check (x-mcp-header in the schema). An upstream server's tool
// qualifies on the same terms (it has no guard); relay lists those.
func (g *Gateway) fastTools(set *mcpgate.ToolSet) (map[string]*connectors.Tool, map[string]bool) {
	out, relay := map[string]*connectors.Tool{}, map[string]bool{}
	for _, info := range set.Tools {
		if info.Server != "" {
			if info.Approval == mcpgate.ApprovalNone && !bytes.Contains(info.Definition, []byte("x-mcp-header")) {
				out[info.Name], relay[info.Name] = nil, true
			}
			continue
		}
		t, ok := g.opts.Registry.Tool(info.Name)
		if !ok || info.Approval != mcpgate.ApprovalNone || t.Guard != nil {
			continue
		}
		if b, err := json.Marshal(t.InputSchema); err != nil || bytes.Contains(b, []byte("x-mcp-header")) {
			continue
		}
		out[t.Name] = t
	}
	return out, relay
}

// fastCounter counts the requests the fast path answered (tests assert that
// it took the cases it should).
type fastCounter struct{ n atomic.Int64 }

// request is one parsed JSON-RPC request; the byte fields are slices of the
// body.
type request struct {
	id        []byte // as sent: a JSON string or a plain integer
	method    []byte // unquoted
	hasParams bool
	name      []byte // unquoted tools/call name
	args      []byte // raw arguments, nil if absent
	meta      []byte // raw _meta object, nil if absent
	// declaresCaps: the _meta declares requests the client answers.
	declaresCaps bool
}

// noInput is what pooled decoders read between uses, so that they keep no
// body alive.
var noInput = new(bytes.Reader)

var (
	decoders = sync.Pool{New: func() any { return jsontext.NewDecoder(noInput) }}
	readers  = sync.Pool{New: func() any { return new(bytes.Reader) }}
	buffers  = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
)

// serveFast answers r when it is a request the fast path handles exactly as
// go-sdk would, and reports whether it did. When it did not, r.Body again
// holds the whole body for the SDK.
func (g *Gateway) serveFast(w http.ResponseWriter, r *http.Request, a *mcpgate.Actor) bool {
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" ||
		len(r.Header.Values("Last-Event-ID")) > 0 {
		return false
	}
	if jsonOK, streamOK := streamableAccepts(r.Header.Values("Accept")); !jsonOK || !streamOK {
		return false
	}
	version := r.Header.Get("Mcp-Protocol-Version")
	if version != newProtocol && !legacyVersions[version] {
		return false
	}
	bp := buffers.Get().(*[]byte)
	body, err := readBody(r.Body, (*bp)[:0])
	if err != nil || len(body) > maxBody {
		// Let the SDK read the same bytes and meet the same error or limit.
		r.Body = replay(body, r.Body, err)
		return false
	}
	served := g.serveBody(w, r, a, version, body)
	if !served {
		r.Body = io.NopCloser(bytes.NewReader(body)) // the buffer now belongs to the SDK
		return false
	}
	*bp = body[:0]
	buffers.Put(bp)
	return true
}

func (g *Gateway) serveBody(w http.ResponseWriter, r *http.Request, a *mcpgate.Actor, version string, body []byte) bool {
	if depthExceeded(body, sdkMaxDepth) {
		return false
	}
	var req request
	if !parseRequest(body, &req) {
		return false
	}
	isNew := version == newProtocol
	if isNew && r.Header.Get("Mcp-Method") != string(req.method) {
		return false
	}
	ok, declares := g.metaOK(req.meta, isNew)
	if !ok {
		return false
	}
	req.declaresCaps = declares
	switch string(req.method) {
	case "tools/call":
		if isNew && r.Header.Get("Mcp-Name") != string(req.name) {
			return false
		}
		return g.fastCall(w, r, a, version, &req)
	case "tools/list":
		if req.name != nil || req.args != nil {
			return false
		}
		return g.fastList(w, r, a, version, &req)
	}
	return false
}

// fastCall runs a tools/call of a tool the fast path may call.
func (g *Gateway) fastCall(w http.ResponseWriter, r *http.Request, a *mcpgate.Actor, version string, req *request) bool {
	if !req.hasParams {
		return false
	}
	// Confirmation tokens and approval ids are the SDK path's (confirm.go,
	// approval.go): exactly the calls where callTool's splitArg acts.
	if hasOwnArg(req.args, confirmationArg) || hasOwnArg(req.args, approvalArg) {
		return false
	}
	_, st, err := g.state(r.Context(), a)
	if err != nil {
		return false
	}
	if _, ok := st.fast[string(req.name)]; !ok {
		return false
	}
	if st.relay[string(req.name)] && req.declaresCaps {
		return false // held should its upstream ask the caller (heldcall.go)
	}
	ctx := r.Context()
	if version != newProtocol {
		// As go-sdk does (#1093): a legacy stateless call is not cancelled
		// when the client goes away; the tool's own deadline bounds it.
		ctx = context.WithoutCancel(ctx)
	}
	ctx, done := g.untilStop(ctx)
	defer done()
	var logs *logStream
	if st.relay[string(req.name)] && version != newProtocol {
		// On 2026-07-28 the fast path takes no request with a log level in
		// its _meta, and go-sdk sends no log message without one.
		logs = &logStream{w: w}
		ctx = mcpgate.NewContextWithRelay(ctx, mcpgate.Relay{Log: logs.log})
	}
	var out json.RawMessage
	if err = g.limitCall(a); err == nil {
		out, err = g.opts.Tools.CallTool(ctx, a, mcpgate.ToolCall{Tool: string(req.name), Arguments: req.args})
		err = stoppingError(ctx, err)
		if confirm := (*mcpgate.ConfirmationRequiredError)(nil); errors.As(err, &confirm) {
			// The policy changed since the set was read; nothing ran. The
			// SDK path runs the confirmation.
			return false
		}
		// An *mcpgate.ApprovalRequiredError cannot happen here (fastTools
		// leaves out every tool with an approval or a guard) except in a
		// race with a policy change; it falls through too, and the SDK path
		// then opens a second request, which expires unused.
		if need := (*mcpgate.ApprovalRequiredError)(nil); errors.As(err, &need) {
			return false
		}
	}
	bp := buffers.Get().(*[]byte)
	b := appendEnvelopeStart((*bp)[:0], req.id)
	switch {
	case err != nil:
		b = appendErrorResult(b, mcpgate.ErrorMessage(err), mcpgate.ErrorRetryAfter(err), version == newProtocol, st.serverInfo)
	case st.relay[string(req.name)]:
		b = appendRelayed(b, out, version == newProtocol, st.serverInfo)
	default:
		b = appendResult(b, out, version == newProtocol, st.serverInfo)
	}
	logs.finish(w, b)
	*bp = b[:0]
	buffers.Put(bp)
	g.fastServed.n.Add(1)
	return true
}

// logStream sends an upstream's log messages on a fast call's stream as
// they come, before its result, as go-sdk's stateless session does for a
// call on the protocols before 2026-07-28: every message at info or above
// (the level go-sdk gives a stateless session, which cannot keep one the
// client set), in go-sdk's envelope.
type logStream struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	done bool // the result went out: nothing more may
}

func (l *logStream) log(m mcpgate.LogMessage) {
	if !logAtLeastInfo(m.Level) {
		return
	}
	//lint:ignore SA1019 the upstream's logging is relayed while the protocol still has it
	params, err := json.Marshal(&sdk.LoggingMessageParams{Level: sdk.LoggingLevel(m.Level), Logger: m.Logger, Data: json.RawMessage(m.Data)})
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	b := append([]byte(`event: message`+"\n"+`data: {"jsonrpc":"2.0","method":"notifications/message","params":`), params...)
	writeSSE(l.w, append(b, '}'))
	_ = http.NewResponseController(l.w).Flush()
}

// finish writes the result (l may be nil) and ends the stream.
func (l *logStream) finish(w http.ResponseWriter, b []byte) {
	if l == nil {
		writeSSE(w, b)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	writeSSE(w, b)
}

// logAtLeastInfo is go-sdk's comparison of a message's level with info:
// by the syslog order of the protocol's levels, a level it does not know
// counting as debug.
func logAtLeastInfo(level string) bool {
	switch level {
	case "info", "notice", "warning", "error", "critical", "alert", "emergency":
		return true
	}
	return false
}

// fastList answers tools/list from the SDK's own answer for the set and
// protocol version, computed once.
func (g *Gateway) fastList(w http.ResponseWriter, r *http.Request, a *mcpgate.Actor, version string, req *request) bool {
	_, st, err := g.state(r.Context(), a)
	if err != nil {
		return false
	}
	result := g.setList(r.Context(), st, version)
	if result == nil {
		return false
	}
	bp := buffers.Get().(*[]byte)
	b := appendEnvelopeStart((*bp)[:0], req.id)
	b = append(b, result...)
	b = append(b, '}')
	writeSSE(w, b)
	*bp = b[:0]
	buffers.Put(bp)
	g.fastServed.n.Add(1)
	return true
}

// sdkList asks go-sdk itself for the tools/list result of srv at version,
// so that the cached answer is the SDK's, byte for byte.
func (g *Gateway) sdkList(ctx context.Context, srv *sdk.Server, version string) []byte {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv },
		&sdk.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true, Logger: g.sdkLog})
	params := `{}`
	if version == newProtocol {
		params = `{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + newProtocol +
			`","io.modelcontextprotocol/clientCapabilities":{}}}`
	}
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":`+params+`}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		r.Header.Set("Mcp-Protocol-Version", version)
	}
	if version == newProtocol {
		r.Header.Set("Mcp-Method", "tools/list")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	data, ok := strings.CutPrefix(rec.Body.String(), "event: message\ndata: ")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/event-stream" || !ok {
		g.log.WarnContext(ctx, "tools/list through the SDK failed", "status", rec.Code)
		return nil
	}
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSuffix(data, "\n\n")), &env); err != nil || len(env.Result) == 0 {
		return nil
	}
	return env.Result
}

// metaOK reports whether a request's _meta is one the fast path answers as
// the SDK does: none on the legacy protocols; on the new one exactly the
// protocol version, valid client capabilities and optionally valid client
// info. Valid _meta values are remembered (clients repeat theirs on every
// call), a bounded number of them.
//
// declares says whether the _meta declares any request the client answers
// (sampling, elicitation, roots): a call of an upstream tool from such a
// caller is the SDK path's, which holds it should the upstream ask
// (heldcall.go).
func (g *Gateway) metaOK(meta []byte, isNew bool) (ok, declares bool) {
	if !isNew {
		return meta == nil, false
	}
	if meta == nil {
		return false, false
	}
	if v, ok := g.metas.Load(string(meta)); ok {
		return true, v.(bool)
	}
	if !validMeta(meta) {
		return false, false
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(meta, &m)
	declares = parseClientCapabilities(m[sdk.MetaKeyClientCapabilities]) != (mcpgate.ClientCapabilities{})
	if g.metaCount.Add(1) <= 1024 {
		g.metas.Store(string(meta), declares)
	}
	return true, declares
}

// clientCapabilitiesV2 mirrors the SDK's unexported type of the same name
// (protocol.go), which it decodes _meta client capabilities into; the
// differential corpus sends each capability with a wrong type.
type clientCapabilitiesV2 struct {
	sdk.ClientCapabilities
	//lint:ignore SA1019 mirrors what the SDK decodes, deprecated field included
	Roots *sdk.RootCapabilities `json:"roots,omitempty"`
}

func validMeta(meta []byte) bool {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(meta, &m); err != nil {
		return false
	}
	for k, v := range m {
		switch k {
		case sdk.MetaKeyProtocolVersion:
			if string(v) != `"`+newProtocol+`"` {
				return false
			}
		case sdk.MetaKeyClientCapabilities:
			var c *clientCapabilitiesV2
			if err := json.Unmarshal(v, &c); err != nil || c == nil {
				return false
			}
		case sdk.MetaKeyClientInfo:
			var c *sdk.Implementation
			if err := json.Unmarshal(v, &c); err != nil || c == nil {
				return false
			}
		default:
			return false // log level, progress token, anything else: the SDK's
		}
	}
	_, hasCaps := m[sdk.MetaKeyClientCapabilities]
	_, hasVersion := m[sdk.MetaKeyProtocolVersion]
	return hasCaps && hasVersion
}

// parseRequest reads a single JSON-RPC request with only the members the
// fast path knows, each once, in canonical spelling (no escapes in names or
// in the method and tool name). It refuses whatever else.
func parseRequest(body []byte, req *request) bool {
	br := readers.Get().(*bytes.Reader)
	br.Reset(body)
	dec := decoders.Get().(*jsontext.Decoder)
	dec.Reset(br)
	ok := parseEnvelope(dec, body, req)
	dec.Reset(noInput)
	decoders.Put(dec)
	br.Reset(nil)
	readers.Put(br)
	return ok
}

// value reads the next value and returns it as a slice of body.
func value(dec *jsontext.Decoder, body []byte) ([]byte, bool) {
	v, err := dec.ReadValue()
	if err != nil {
		return nil, false
	}
	end := int(dec.InputOffset())
	return body[end-len(v) : end], true
}

// plainString unquotes a JSON string that has no escapes.
func plainString(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
		return nil, false
	}
	return v[1 : len(v)-1], true
}

func parseEnvelope(dec *jsontext.Decoder, body []byte, req *request) bool {
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	var version bool
	for dec.PeekKind() != '}' {
		name, ok := value(dec, body)
		if !ok {
			return false
		}
		v, ok := value(dec, body)
		if !ok {
			return false
		}
		switch string(name) {
		case `"jsonrpc"`:
			version = string(v) == `"2.0"`
		case `"id"`:
			if !validID(v) {
				return false
			}
			req.id = v
		case `"method"`:
			if req.method, ok = plainString(v); !ok {
				return false
			}
		case `"params"`:
			if v[0] != '{' || !parseParams(v, req) {
				return false
			}
			req.hasParams = true
		default:
			return false
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return false
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return false // trailing data: the SDK reads past it; leave it that
	}
	return version && req.id != nil && req.method != nil
}

// validID accepts a JSON string, or an integer written plainly that a
// float64 holds exactly (the SDK decodes ids as float64, then int64).
func validID(v []byte) bool {
	if v[0] == '"' {
		return true
	}
	digits := v
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(v) > 1) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func parseParams(params []byte, req *request) bool {
	br := readers.Get().(*bytes.Reader)
	br.Reset(params)
	dec := decoders.Get().(*jsontext.Decoder)
	dec.Reset(br)
	defer func() {
		dec.Reset(noInput)
		decoders.Put(dec)
		br.Reset(nil)
		readers.Put(br)
	}()
	if _, err := dec.ReadToken(); err != nil {
		return false
	}
	for dec.PeekKind() != '}' {
		name, ok := value(dec, params)
		if !ok {
			return false
		}
		v, ok := value(dec, params)
		if !ok {
			return false
		}
		switch string(name) {
		case `"name"`:
			if req.name, ok = plainString(v); !ok {
				return false
			}
		case `"arguments"`:
			req.args = v
		case `"_meta"`:
			if v[0] != '{' {
				return false
			}
			req.meta = v
		default:
			return false // cursor, task, inputResponses, requestState, ...
		}
	}
	_, err := dec.ReadToken()
	return err == nil
}

// depthExceeded is the SDK's nesting check (internal/json.checkMaxDepth),
// byte for byte, which it does not export; TestDepthExceeded_MatchesSDK and
// FuzzDepthExceeded hold it to the SDK's decoder.
func depthExceeded(data []byte, maxDepth int) bool {
	var depth int
	var inString, escaped bool
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > maxDepth {
				return true
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return false
}

// streamableAccepts is the SDK's Accept check (streamable.go), byte for
// byte, which it does not export; TestStreamableAccepts_MatchesSDK and
// FuzzStreamableAccepts hold it to the SDK's handler.
func streamableAccepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for _, raw := range strings.Split(value, ",") {
			token := strings.TrimSpace(raw)
			base, _, _ := strings.Cut(token, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK = true
				streamOK = true
			}
		}
	}
	return jsonOK, streamOK
}

// readBody reads at most maxBody+1 bytes into buf.
func readBody(body io.Reader, buf []byte) ([]byte, error) {
	lr := io.LimitedReader{R: body, N: maxBody + 1}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// replay gives the SDK what it would have read: the bytes already read, then
// the rest of the body, or the read error.
func replay(read []byte, rest io.ReadCloser, err error) io.ReadCloser {
	var tail io.Reader = rest
	if err != nil {
		tail = errReader{err}
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(read), tail), rest}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func appendEnvelopeStart(b, id []byte) []byte {
	b = append(b, "event: message\ndata: "...)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	return append(b, `,"result":`...)
}

// appendResult writes what go-sdk writes for callTool's structuredResult:
// the output as structured content and as text.
func appendResult(b []byte, out json.RawMessage, isNew bool, serverInfo []byte) []byte {
	b = append(b, `{"content":[{"type":"text","text":`...)
	b, _ = jsontext.AppendQuote(b, out)
	b = append(b, `}],"structuredContent":`...)
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	b = append(b, out...)
	if isNew {
		b = append(b, `,"resultType":"complete","_meta":{"`+sdk.MetaKeyServerInfo+`":`...)
		b = append(b, serverInfo...)
		b = append(b, '}')
	}
	return append(b, "}}"...)
}

// appendRelayed writes an upstream's result as the SDK path answers it
// (relayedResult). On the protocols before 2026-07-28, when that answer
// means exactly what the upstream sent, the upstream's own bytes are
// written (compacted: an SSE data line holds no newline), so its member
// order and spelling reach the caller; on 2026-07-28 the result also
// carries the gateway's resultType and serverInfo, as go-sdk adds them.
func appendRelayed(b []byte, raw json.RawMessage, isNew bool, serverInfo []byte) []byte {
	res := relayedResult(raw)
	enc, err := json.Marshal(res)
	if err != nil {
		return append(append(b, `{"content":[],"isError":true}`...), '}')
	}
	if !isNew {
		if sameJSON(raw, enc) {
			var buf bytes.Buffer
			if json.Compact(&buf, raw) == nil {
				return append(append(b, buf.Bytes()...), '}')
			}
		}
		return append(append(b, enc...), '}')
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(enc, &m)
	meta := map[string]json.RawMessage{}
	if len(m["_meta"]) > 0 {
		_ = json.Unmarshal(m["_meta"], &meta)
	}
	meta[sdk.MetaKeyServerInfo] = serverInfo
	m["_meta"], _ = json.Marshal(meta)
	m["resultType"] = json.RawMessage(`"complete"`)
	out, _ := json.Marshal(m)
	return append(append(b, out...), '}')
}

// sameJSON reports whether two JSON texts hold the same value (numbers
// compared as written).
func sameJSON(a, b []byte) bool {
	decode := func(data []byte) (any, bool) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		return v, dec.Decode(new(any)) == io.EOF
	}
	va, ok := decode(a)
	if !ok {
		return false
	}
	vb, ok := decode(b)
	return ok && reflect.DeepEqual(va, vb)
}

// appendErrorResult writes what go-sdk writes for callTool's error result.
func appendErrorResult(b []byte, msg string, retryAfter int, isNew bool, serverInfo []byte) []byte {
	b = append(b, `{"content":[{"type":"text","text":`...)
	b, _ = jsontext.AppendQuote(b, msg)
	b = append(b, `}],"isError":true`...)
	if isNew {
		b = append(b, `,"resultType":"complete"`...)
	}
	if retryAfter > 0 || isNew {
		b = append(b, `,"_meta":{`...)
		if retryAfter > 0 {
			b = append(b, `"retryAfterSeconds":`...)
			b = appendInt(b, retryAfter)
			if isNew {
				b = append(b, ',')
			}
		}
		if isNew {
			b = append(b, `"`+sdk.MetaKeyServerInfo+`":`...)
			b = append(b, serverInfo...)
		}
		b = append(b, '}')
	}
	return append(b, "}}"...)
}

func appendInt(b []byte, n int) []byte {
	var tmp [20]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}

// writeSSE writes one complete SSE message event (b holds it up to the end
// of its data) with the SDK's headers. Unlike the SDK it does not flush: the
// event is the whole answer, so net/http sends it in one write when the
// handler returns (with a Content-Length when it is small), where a flush
// costs a second write system call per call.
func writeSSE(w http.ResponseWriter, b []byte) {
	// The SDK's headers for a POST answered with a stream. Set, not shared
	// slices: middleware may edit a response's header values in place.
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	b = append(b, "\n\n"...)
	_, _ = w.Write(b)
}

// levelHandler drops records below a level: go-sdk logs every stateless
// session's connect and close at info, two lines per request that say
// nothing an operator needs.
type levelHandler struct {
	min slog.Level
	slog.Handler
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return levelHandler{h.min, h.Handler.WithAttrs(as)}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{h.min, h.Handler.WithGroup(name)}
}
