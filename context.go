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

type progressKey struct{}

// NewContextWithProgress returns ctx carrying where a tool call's
// progress goes: set by a front door whose caller asked for progress.
func NewContextWithProgress(ctx context.Context, fn func(Progress)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// ProgressFromContext returns where a call's progress goes, or nil.
func ProgressFromContext(ctx context.Context) func(Progress) {
	fn, _ := ctx.Value(progressKey{}).(func(Progress))
	return fn
}
