//lint:file-ignore SA1019 the upstream's logging is relayed while the protocol still has it (deprecated from 2026-07-28)

package upstream

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The defaults of Options.
const (
	DefaultMaxAnswerBytes = 10 << 20
	DefaultIdleTimeout    = 60 * time.Second
	DefaultCallTimeout    = 5 * time.Minute
	DefaultSessionIdle    = 5 * time.Minute
	DefaultConnectTimeout = 30 * time.Second
	// DefaultSessionsPerKey is how many sessions one key holds at most:
	// calls of one person to one server beyond it wait for a session.
	DefaultSessionsPerKey = 4
)

// Options configures a Pool. Zero values take the defaults above.
type Options struct {
	Network Network
	// ClientName and ClientVersion are what the gateway calls itself in
	// initialize.
	ClientName, ClientVersion string
	// Limits are the per-call defaults; a CallRequest may set its own
	// (per-server guardrails).
	Limits Limits
	// SessionIdle closes an upstream session unused this long.
	SessionIdle time.Duration
	// SessionsPerKey bounds the sessions one key holds at once, each used
	// by one call or relay at a time; a caller past it waits (under its
	// own context) for one to be given back.
	SessionsPerKey int
	// ConnectTimeout bounds initialize, and each discovery as a whole.
	ConnectTimeout time.Duration
	// ProtocolVersion, when set, skips the 2026-07-28 server/discover probe
	// and initializes at this version (for servers that mishandle it).
	ProtocolVersion string
	Logger          *slog.Logger
	// OnToolListChanged, when set, is told of each notifications/tools/
	// list_changed an upstream sends on a session of the pool, with the
	// session's target (see listchanged.go).
	OnToolListChanged func(Target)
}

// Limits bound one call (or one discovery request).
type Limits struct {
	// MaxAnswerBytes caps the bytes read for the answer, progress and log
	// notifications on its stream included, counted while reading.
	MaxAnswerBytes int64
	// IdleTimeout ends a call that shows no progress for this long; each
	// progress notification starts it again.
	IdleTimeout time.Duration
	// CallTimeout ends a call after this long, whatever its progress.
	CallTimeout time.Duration
}

func (l Limits) or(def Limits) Limits {
	if l.MaxAnswerBytes <= 0 {
		l.MaxAnswerBytes = def.MaxAnswerBytes
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = def.IdleTimeout
	}
	if l.CallTimeout <= 0 {
		l.CallTimeout = def.CallTimeout
	}
	return l
}

// Pool holds the gateway's client sessions with upstreams, per scope key
// K that the caller chooses (workspace, server and, where no state may
// cross people, person; or one client's own session): each session serves
// one call or relay at a time, is reused by the next call of its key, and
// is never shared between keys.
type Pool[K comparable] struct {
	opts     Options
	limits   Limits
	progress sync.Map // upstream progress token -> *callState

	// stopped ends when the pool closes, and with it every call in flight
	// (go-sdk's ClientSession.Close waits for them otherwise).
	stopped context.Context
	stop    context.CancelFunc

	// waiterGaveUp, in tests, runs when a waiting caller's context has
	// ended, before it takes the lock to leave.
	waiterGaveUp func()

	mu      sync.Mutex
	closed  bool
	keys    map[K]*keySessions[K]
	closing sync.WaitGroup
}

// New returns a Pool.
func New[K comparable](opts Options) *Pool[K] {
	if opts.SessionIdle <= 0 {
		opts.SessionIdle = DefaultSessionIdle
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.SessionsPerKey <= 0 {
		opts.SessionsPerKey = DefaultSessionsPerKey
	}
	if opts.ClientName == "" {
		opts.ClientName, opts.ClientVersion = "mcpgate", "v1"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	stopped, stop := context.WithCancel(context.Background())
	return &Pool[K]{opts: opts, keys: map[K]*keySessions[K]{}, stopped: stopped, stop: stop,
		limits: opts.Limits.or(Limits{MaxAnswerBytes: DefaultMaxAnswerBytes, IdleTimeout: DefaultIdleTimeout, CallTimeout: DefaultCallTimeout})}
}

// untilClosed is ctx, ended with errPoolClosed when the pool closes.
func (p *Pool[K]) untilClosed(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(p.stopped, func() { cancel(errPoolClosed) })
	return ctx, func() { stop(); cancel(nil) }
}

// session is one live upstream client session.
type session struct {
	cs        *mcp.ClientSession
	conn      *rawConn
	closeIdle func()
	redact    redactor
	init      json.RawMessage // the raw initialize (or server/discover) result
	state     *sessionState
	opened    time.Time
	dead      atomic.Bool  // its connection ended, or its key was forgotten
	caps      Capabilities // what it declared (its target's)
}

func (s *session) close() {
	_ = s.cs.Close()
	s.closeIdle()
}

// closeWithin closes the session with its DELETE bounded by ctx: go-sdk
// sends it on the connection's own context for up to 5 s, which for a
// discovery would outlast the caller's deadline.
func (s *session) closeWithin(ctx context.Context) {
	s.state.setCloseContext(ctx)
	s.close()
}

// hop is what every connection to an upstream goes through: target's URL
// checked against the network policy, its headers checked, and the guarded
// client that sends only those headers (closeIdle releases its
// connections). Both the pool's sessions and a Subscriber's use it.
type hop struct {
	endpoint  string
	client    *http.Client
	closeIdle func()
	state     *sessionState
	redact    redactor
}

func (p *Pool[K]) hop(target Target) (*hop, error) {
	u, err := p.opts.Network.CheckURL(target.URL)
	if err != nil {
		return nil, &Error{Kind: KindRefused, Message: err.Error()}
	}
	if err := ValidateHeaders(target.Headers); err != nil {
		return nil, &Error{Kind: KindRefused, Message: err.Error()}
	}
	client, closeIdle := p.opts.Network.httpClient()
	state := &sessionState{}
	client.Transport = &hopTransport{base: client.Transport, headers: target.Headers, state: state}
	return &hop{endpoint: u.String(), client: client, closeIdle: closeIdle, state: state, redact: newRedactor(target)}, nil
}

// sessionOptions are the options of every client session the pool opens:
// the protocol version the operator fixed, if any.
func (p *Pool[K]) sessionOptions() *mcp.ClientSessionOptions {
	if p.opts.ProtocolVersion == "" {
		return nil
	}
	return &mcp.ClientSessionOptions{ProtocolVersion: p.opts.ProtocolVersion}
}

// connect opens a session to target, under ctx (bounded by the caller).
func (p *Pool[K]) connect(ctx context.Context, target Target) (*session, error) {
	ctx = withoutValues(ctx)
	h, err := p.hop(target)
	if err != nil {
		return nil, err
	}
	r, client, closeIdle, state := h.redact, h.client, h.closeIdle, h.state
	rt := &rawTransport{state: state, inner: &mcp.StreamableClientTransport{
		Endpoint: h.endpoint, HTTPClient: client, MaxRetries: -1, DisableStandaloneSSE: true,
		MaxEventSize: int(p.limits.MaxAnswerBytes) + 1,
	}}
	// The session declares the requests to the client its target says
	// (none by default), and relays them to its calls
	// (clientrequests.go); with any, go-sdk's own answering of 2026-07-28
	// input requests is off, the call's to do.
	copts := &mcp.ClientOptions{Logger: p.opts.Logger, ProgressNotificationHandler: p.onProgress,
		Capabilities: declared(target.Capabilities), ToolListChangedHandler: p.toolListChanged(target)}
	if target.Capabilities.relaysRequests() || target.Capabilities.PassInputRequests {
		copts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	mc := mcp.NewClient(&mcp.Implementation{Name: p.opts.ClientName, Version: p.opts.ClientVersion}, copts)
	mc.AddReceivingMiddleware(clientRequestMiddleware(state))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	vals := &requestValues{probe: &probe{}, slot: &rawSlot{}, budget: &budget{cancel: cancel}}
	vals.budget.remaining.Store(p.limits.MaxAnswerBytes)
	cs, err := mc.Connect(withRequestValues(ctx, vals), rt, p.sessionOptions())
	if err != nil {
		closeIdle()
		if context.Cause(ctx) == errTooLarge {
			return nil, r.newError(KindTooLarge, nil, "the server's initialize answer is larger than %d bytes", p.limits.MaxAnswerBytes)
		}
		if e := versionMismatch(vals.slot, r); e != nil {
			return nil, e
		}
		return nil, classify(err, vals.probe, r)
	}
	init, _, _ := vals.slot.answer("initialize")
	if init == nil {
		init, _, _ = vals.slot.answer("server/discover")
	}
	s := &session{cs: cs, conn: rt.conn, closeIdle: closeIdle, redact: r, init: init, state: state, opened: time.Now(),
		caps: target.Capabilities}
	s.openLog(ctx, p.limits)
	return s, nil
}

// logAll is the level the gateway asks an upstream for: every message.
// The filter is the calling client's, applied where the message is sent
// on (go-sdk's server drops what is below the level the client set, and
// a stateless session that set none gets info and above); asking the
// upstream for less would hide from a client what its own level allows.
const logAll mcp.LoggingLevel = "debug"

// methodLogMessage is the log message notification.
const methodLogMessage = "notifications/message"

// openLog asks a session before 2026-07-28 whose server declares logging
// for every log message: such a server sends none until a level is set
// (go-sdk's does so). A 2026-07-28 session has no session level; each
// call asks in its _meta (relayMeta). A server that refuses is left as it
// is: its tools work without logs.
func (s *session) openLog(ctx context.Context, lim Limits) {
	init := s.cs.InitializeResult()
	if init == nil || init.Capabilities == nil || init.Capabilities.Logging == nil || newProtocol(s.cs) {
		return
	}
	_, _ = s.request(ctx, MethodLoggingSetLevel, lim, func(ctx context.Context) error {
		return s.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: logAll})
	})
}

// logs reports whether the session's server declares logging.
func (s *session) logs() bool {
	init := s.cs.InitializeResult()
	return init != nil && init.Capabilities != nil && init.Capabilities.Logging != nil
}

// supportedVersions are the protocol versions go-sdk speaks, newest first:
// its own list, so that it cannot drift from the SDK.
var supportedVersions = mcp.SupportedProtocolVersions()

// versionMismatch reports a server that answered initialize with a version
// the gateway does not speak, or refused the client's with a JSON-RPC
// error listing the versions it supports.
func versionMismatch(slot *rawSlot, r redactor) *Error {
	raw, rpcErr, ok := slot.answer("initialize")
	if !ok {
		return nil
	}
	if rpcErr != nil {
		var data struct {
			Supported []string `json:"supported"`
		}
		if json.Unmarshal(rpcErr.Data, &data) == nil && len(data.Supported) > 0 {
			return &Error{Kind: KindProtocolVersion, Message: fmt.Sprintf(
				"the server speaks MCP versions %s; the gateway speaks %s", cutText(r.text(fmt.Sprint(data.Supported)), maxQuoted), fmt.Sprint(supportedVersions))}
		}
		return nil
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(raw, &init) == nil && !slices.Contains(supportedVersions, init.ProtocolVersion) {
		return &Error{Kind: KindProtocolVersion, Message: fmt.Sprintf(
			"the server speaks MCP version %q, which the gateway does not (it speaks %s)", cutText(r.text(init.ProtocolVersion), maxQuoted), fmt.Sprint(supportedVersions))}
	}
	return nil
}

// request sends one request through send under the limits, and returns the
// upstream's raw answer to method: the bytes as they came, even when the
// SDK's typed decoding of them failed.
func (s *session) request(ctx context.Context, method string, lim Limits, send func(context.Context) error) (json.RawMessage, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctx, stop := context.WithTimeoutCause(ctx, lim.CallTimeout, errAbsolute)
	defer stop()
	vals := &requestValues{probe: &probe{}, slot: &rawSlot{}, budget: &budget{cancel: cancel}}
	vals.budget.remaining.Store(lim.MaxAnswerBytes)
	err := send(withRequestValues(ctx, vals))
	vals.slot.mu.Lock()
	ids := vals.slot.ids
	vals.slot.mu.Unlock()
	s.conn.forget(ids...)
	if raw, rpcErr, ok := vals.slot.answer(method); ok {
		if rpcErr != nil {
			return nil, s.redact.rpc(rpcErr)
		}
		return raw, nil
	}
	if ctx.Err() != nil {
		switch cause := context.Cause(ctx); cause {
		case errTooLarge:
			return nil, s.redact.newError(KindTooLarge, nil, "the server's answer is larger than %d bytes", lim.MaxAnswerBytes)
		case errIdle:
			return nil, s.redact.newError(KindIdle, nil, "the server showed no progress for %s", lim.IdleTimeout)
		case errAbsolute:
			return nil, s.redact.newError(KindTimeout, nil, "the server did not answer within %s", lim.CallTimeout)
		default:
			return nil, cause // the caller's own context ended
		}
	}
	if errors.Is(err, mcp.ErrSessionMissing) {
		return nil, errSessionMissing
	}
	return nil, classify(err, vals.probe, s.redact)
}

var errSessionMissing = errors.New("upstream session expired")

// callState is one call in flight, found by the progress token the
// gateway sent in its place.
type callState struct {
	session  *mcp.ClientSession // progress counts only from the session the call went on
	idle     *time.Timer
	idleFor  time.Duration
	relay    func(Progress)
	log      func(LogMessage)
	redact   redactor
	finished atomic.Bool
	// asking relays the server's requests to the client (nil: none).
	asking *asking
}

// LogMessage is a log message (notifications/message) the server sent
// during a call, for the caller to relay: Data is its data as it came,
// with credential values replaced as in every other text of the server's.
type LogMessage struct {
	Level  string
	Logger string
	Data   json.RawMessage
}

// logged relays one log message of the call; a message that is not one
// (no level, or params that are not an object) is dropped.
func (c *callState) logged(params json.RawMessage) {
	if c.log == nil || c.finished.Load() {
		return
	}
	var m struct {
		Level  string          `json:"level"`
		Logger string          `json:"logger"`
		Data   json.RawMessage `json:"data"`
	}
	if json.Unmarshal(params, &m) != nil || m.Level == "" {
		return
	}
	data := json.RawMessage(c.redact.text(string(m.Data)))
	if !json.Valid(data) {
		data = json.RawMessage(`"[redacted]"`)
	}
	c.log(LogMessage{Level: m.Level, Logger: c.redact.text(m.Logger), Data: data})
}

// Progress is a progress notification of a call, for the caller to relay
// under the token its own client gave.
type Progress struct {
	Progress float64
	Total    float64
	Message  string
}

func (p *Pool[K]) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	token, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := p.progress.Load(token)
	if !ok {
		return
	}
	c := v.(*callState)
	if c.finished.Load() || req.Session != c.session {
		return // another scope's session naming this call's token: not its progress
	}
	c.idle.Reset(c.idleFor)
	if c.relay != nil {
		c.relay(Progress{Progress: req.Params.Progress, Total: req.Params.Total, Message: req.Params.Message})
	}
}

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "mcpgate-" + hex.EncodeToString(b)
}

// Fingerprint names a target (URL and credential) without holding its
// credential: a SHA-256 over both, the key sessions are matched on, and
// what others keep in memory in place of the target.
func Fingerprint(t Target) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q\n", t.URL)
	names := make([]string, 0, len(t.Headers))
	for n := range t.Headers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(h, "%q=%q\n", n, t.Headers[n].Reveal())
	}
	fmt.Fprintf(h, "caps=%+v\n", t.Capabilities)
	return hex.EncodeToString(h.Sum(nil))
}
