package mcpgate

import "context"

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
