package mcpgate

import (
	"context"
	"encoding/json"
	"fmt"
)

type ctxKey int

const (
	userKey ctxKey = iota
	requestIDKey
	sessionIDKey
	workspaceKey
	csrfKey
)

// NewContextWithSessionID returns ctx carrying the id of the dashboard
// session the request came with, so that a person's session list can mark
// "this browser".
func NewContextWithSessionID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, sessionIDKey, id)
}

// SessionIDFromContext returns the request's session id, or "".
func SessionIDFromContext(ctx context.Context) string {
	id, _ := ctx.Value(sessionIDKey).(string)
	return id
}

// NewContextWithCSRFToken returns ctx carrying the CSRF token bound to the
// request's dashboard session, which a page's forms echo.
func NewContextWithCSRFToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, csrfKey, token)
}

// CSRFTokenFromContext returns the request's session-bound CSRF token, or ""
// when the request has no session.
func CSRFTokenFromContext(ctx context.Context) string {
	t, _ := ctx.Value(csrfKey).(string)
	return t
}

// NewContextWithUser returns ctx carrying the authenticated dashboard user.
func NewContextWithUser(ctx context.Context, u *User) context.Context {
	return context.WithValue(ctx, userKey, u)
}

// UserFromContext returns the authenticated dashboard user, or nil.
func UserFromContext(ctx context.Context) *User {
	u, _ := ctx.Value(userKey).(*User)
	return u
}

// NewContextWithRequestID returns ctx carrying the request id.
func NewContextWithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// RequestIDFromContext returns the request id, or "".
func RequestIDFromContext(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// NewContextWithWorkspace returns ctx carrying the workspace a dashboard or
// API route entered, as its user sees it (with their role), and that user as
// the actor in it.
func NewContextWithWorkspace(ctx context.Context, ws *Workspace, a *Actor) context.Context {
	return NewContextWithActor(context.WithValue(ctx, workspaceKey, ws), a)
}

// WorkspaceFromContext returns the workspace NewContextWithWorkspace put in
// ctx, or nil.
func WorkspaceFromContext(ctx context.Context) *Workspace {
	ws, _ := ctx.Value(workspaceKey).(*Workspace)
	return ws
}

// Progress is a progress notification of a tool call in flight, for the
// front door to send its caller under the token the caller gave.
type Progress struct {
	Progress, Total float64
	Message         string
}

// LogMessage is a log message (notifications/message) a server sent
// during a tool call, for the front door to send its caller on the call's
// stream. Data is the message's data as the server sent it (raw JSON).
type LogMessage struct {
	Level  string
	Logger string
	Data   []byte
}

// Relay is where what a tool call's server sends during the call goes, for
// the front door to pass on to its caller: progress (nil unless the caller
// gave a progress token) and log messages (nil when the front door cannot
// send them).
type Relay struct {
	Progress func(Progress)
	Log      func(LogMessage)
	// Request sends a request of the call's server to the caller's client
	// on the call's stream and returns the client's result, raw (nil: the
	// front door cannot send requests to this caller). A JSON-RPC error
	// the client answered comes back as *ClientRPCError; the context
	// ending (the call's, or the caller going away) as its error.
	Request func(ctx context.Context, req ClientRequest) (json.RawMessage, error)
	// Capabilities are the requests the caller's client said it answers,
	// on its initialize (2025 protocols) or in the call's _meta
	// (2026-07-28); the zero value: none, or not known.
	Capabilities ClientCapabilities
	// InputRetry says the caller answers an upstream's input requests by
	// retrying its call (2026-07-28's multi round-trip): the upstream's
	// input_required result is passed to it, not answered on a stream.
	InputRetry bool
}

// Methods of the requests a server sends its client that a tool call may
// relay (Relay.Request).
const (
	MethodCreateMessage = "sampling/createMessage"
	MethodElicit        = "elicitation/create"
	MethodListRoots     = "roots/list"
)

// ClientRequest is one request of a server to its client during a tool
// call: Method (one of MethodCreateMessage, MethodElicit,
// MethodListRoots) and its params as the server sent them.
type ClientRequest struct {
	Method string
	Params json.RawMessage
}

// ClientCapabilities are the server-to-client requests a client answers.
type ClientCapabilities struct {
	Sampling bool
	// SamplingTools: the client takes tools in a sampling request.
	SamplingTools bool
	// ElicitationForm and ElicitationURL are elicitation's two modes (a
	// client that declares elicitation with no mode has form).
	ElicitationForm bool
	ElicitationURL  bool
	Roots           bool
}

// Intersect returns the capabilities both c and o have.
func (c ClientCapabilities) Intersect(o ClientCapabilities) ClientCapabilities {
	return ClientCapabilities{Sampling: c.Sampling && o.Sampling, SamplingTools: c.SamplingTools && o.SamplingTools,
		ElicitationForm: c.ElicitationForm && o.ElicitationForm, ElicitationURL: c.ElicitationURL && o.ElicitationURL,
		Roots: c.Roots && o.Roots}
}

// ClientRPCError is the JSON-RPC error a client answered to a relayed
// request, for the server that sent it.
type ClientRPCError struct {
	Code    int64
	Message string
	Data    json.RawMessage
}

// Error implements error.
func (e *ClientRPCError) Error() string {
	return fmt.Sprintf("the client answered with JSON-RPC error %d: %s", e.Code, e.Message)
}

type relayKey struct{}

// NewContextWithRelay returns ctx carrying where a tool call's progress and
// log messages go: set by the front door that serves the call.
func NewContextWithRelay(ctx context.Context, r Relay) context.Context {
	return context.WithValue(ctx, relayKey{}, r)
}

// RelayFromContext returns where a call's progress and log messages go; its
// members are nil where there is nowhere.
func RelayFromContext(ctx context.Context) Relay {
	r, _ := ctx.Value(relayKey{}).(Relay)
	return r
}
