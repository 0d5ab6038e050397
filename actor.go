package mcpgate

import (
	"context"
	"strings"
)

// Source is the front door an action came through, as the audit log
// records it.
type Source string

// The sources.
const (
	// SourceMCP is an AI client calling through the MCP endpoint.
	SourceMCP Source = "mcp"
	// SourceDashboard is a person signed in to the dashboard: its pages and
	// the JSON API, which authenticates only dashboard sessions.
	SourceDashboard Source = "dashboard"
	// SourceOperator is the operator at the server, through the command
	// (`mcpgate user`): no person signed in, so its events name the account
	// they changed as their actor.
	SourceOperator Source = "operator"
	// SourceGateway is the gateway itself, acting on no one's request: the
	// monitor's probes and re-discoveries of upstream servers.
	SourceGateway Source = "gateway"
	// SourceAPI labelled the JSON API's admin actions before they were
	// counted as the dashboard's; old audit rows may still carry it.
	SourceAPI Source = "api"
)

// Actor is who performs an action: a person signed in to the dashboard or
// the API, or an AI client holding an MCP key. Services take it as their
// first argument after the context and decide from it, in one place, what
// the action may see and change.
//
// Role is set only by WorkspaceService.Enter, which reads it from the
// database; an actor built from an MCP key carries the key's scope and no
// role, since a key never administers a workspace.
type Actor struct {
	UserID string
	Email  string
	// WorkspaceID is the workspace the actor acts in.
	WorkspaceID string
	// Role is the user's role in WorkspaceID, for a signed-in person.
	Role Role
	// Scope limits the tools the actor may call (full for a person).
	Scope Scope
	// KeyID is the MCP key used, for an AI client.
	KeyID string
	// GrantID and ClientName name the OAuth grant and its client, for an
	// AI client holding an OAuth access token.
	GrantID    string
	ClientName string
	// Resource is the resource indicator (RFC 8707) the OAuth grant names:
	// the MCP endpoint the token is for (mcp.Options.TokenFor).
	Resource string
	Source   Source
}

// CredentialID names the credential an AI client presented: its MCP key's
// id, or "grant:" and its OAuth grant's id; "" for a person (a dashboard
// session). It is the unit of rate limits and of what confirmations and
// approvals are bound to.
func (a *Actor) CredentialID() string {
	switch {
	case a == nil:
		return ""
	case a.KeyID != "":
		return a.KeyID
	case a.GrantID != "":
		return "grant:" + a.GrantID
	}
	return ""
}

// CanAdmin reports whether the actor may manage the workspace.
func (a *Actor) CanAdmin() bool { return a != nil && a.Role.CanAdmin() }

// Presented is a credential as a request presented it. The front door (the
// MCP endpoint) reads it out of the request; authenticators verify it and
// never see HTTP.
type Presented struct {
	// Value is the credential itself.
	Value Secret
	// Bearer reports that it came as an Authorization bearer token, the
	// only place an OAuth access token is taken from; an MCP key may also
	// come in the connector URL's path or in X-API-Key.
	Bearer bool
}

// Authenticator turns a presented credential into the actor it names. It
// returns (nil, nil) when the credential is not of its kind, so that
// several authenticators can be asked in turn; an *AuthError when it is of
// its kind but not valid; and any other error when it cannot check right
// now (the database is away).
type Authenticator interface {
	Authenticate(ctx context.Context, p Presented) (*Actor, error)
}

// AuthError is a refused credential. Reason is for metrics and logs only
// (missing, malformed, unknown, revoked, expired); every refusal looks the
// same to the client, so that a key cannot be probed.
type AuthError struct{ Reason string }

// Error implements error.
func (e *AuthError) Error() string { return "credential refused: " + e.Reason }

type actorKey struct{}

// NewContextWithActor returns ctx carrying the authenticated actor.
func NewContextWithActor(ctx context.Context, a *Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFromContext returns the actor an authenticator put in ctx, or nil.
func ActorFromContext(ctx context.Context) *Actor {
	a, _ := ctx.Value(actorKey{}).(*Actor)
	return a
}

// ConnectorPathPrefix starts the path of a connector URL,
// <PUBLIC_URL>/c/<key>/mcp: the form for clients that take only a URL.
const ConnectorPathPrefix = "/c/"

// ConnectorURL returns the connector URL of a key.
func ConnectorURL(publicURL, key string) string {
	return strings.TrimRight(publicURL, "/") + ConnectorPathPrefix + key + "/mcp"
}

// ConnectorURLKey returns the key inside a connector URL's path
// (/c/<key>/mcp), or "" when the path is not one.
func ConnectorURLKey(path string) string {
	rest, ok := strings.CutPrefix(path, ConnectorPathPrefix)
	if !ok {
		return ""
	}
	key, tail, ok := strings.Cut(rest, "/")
	if !ok || tail != "mcp" {
		return ""
	}
	return key
}
