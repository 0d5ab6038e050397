package mcpgate

import (
	"context"
	"fmt"
)

// SessionScope says how the gateway scopes its sessions with an upstream
// server.
type SessionScope string

// The session scopes.
const (
	// ScopePerson: sessions per workspace, server and person, each carrying
	// one call at a time; a client of the server's own endpoint has no
	// session (the endpoint is stateless).
	ScopePerson SessionScope = "person"
	// ScopeClient: for servers that keep state per session. The server's
	// own endpoint gives each client (protocols before 2026-07-28) a
	// session of its own, and the gateway's sessions with the server are
	// per client session besides.
	ScopeClient SessionScope = "client"
)

// Validate refuses an unknown scope.
func (s SessionScope) Validate() error {
	switch s {
	case ScopePerson, ScopeClient:
		return nil
	}
	return Errorf(EInvalid, "session_scope must be %q or %q", ScopePerson, ScopeClient)
}

// ClientSession is the session a client holds on one server's own
// endpoint: the server it was issued for and its random id, verified by
// the endpoint before it is put in a request's context.
type ClientSession struct {
	Server string
	ID     string
}

func (c ClientSession) String() string { return fmt.Sprintf("%s/%s", c.Server, c.ID) }

type clientSessionKey struct{}

// NewContextWithClientSession returns ctx carrying the caller's verified
// client session.
func NewContextWithClientSession(ctx context.Context, s ClientSession) context.Context {
	return context.WithValue(ctx, clientSessionKey{}, s)
}

// ClientSessionFromContext returns the id of the caller's client session
// on server's endpoint, or "" when the request has none for that server.
func ClientSessionFromContext(ctx context.Context, server string) string {
	s, ok := ctx.Value(clientSessionKey{}).(ClientSession)
	if !ok || s.Server != server {
		return ""
	}
	return s.ID
}

// ClientSessionEnder is what a server endpoint service implements to close
// the gateway's sessions with a server that belong to one client session
// (the client's DELETE).
type ClientSessionEnder interface {
	EndClientSession(ctx context.Context, a *Actor, server, id string) error
}
