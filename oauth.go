package mcpgate

import (
	"context"
	"time"
)

// OAuth 2.1 for MCP clients: the gateway is the authorization server of its
// own MCP endpoint, so that clients which take only a URL, or start OAuth by
// themselves, connect without a key being pasted. A person's consent is a
// Grant: one client, one workspace, one access level; the client's tokens
// hang off it.

// The OAuth scopes the MCP endpoint understands. A grant is full or
// read-only, exactly like a key's Scope; these are its names on the wire.
const (
	// OAuthScopeTools asks for the workspace's tools.
	OAuthScopeTools = "mcp:tools"
	// OAuthScopeRead asks for the read-only tools only.
	OAuthScopeRead = "mcp:tools:read"
)

// OAuthScopeOf returns the wire name of a grant's scope.
func OAuthScopeOf(s Scope) string {
	if s == ScopeReadOnly {
		return OAuthScopeRead
	}
	return OAuthScopeTools
}

// ClientKind says how the gateway knows an OAuth client.
type ClientKind string

// The client kinds.
const (
	// ClientDCR registered itself (RFC 7591): anyone can, so its name is
	// only a claim.
	ClientDCR ClientKind = "dcr"
	// ClientCIMD is known by its client ID metadata document, an https URL
	// whose host vouches for the client.
	ClientCIMD ClientKind = "cimd"
)

// OAuthClient is an MCP client that may ask people for access.
type OAuthClient struct {
	ID           string     `json:"client_id"`
	Kind         ClientKind `json:"kind"`
	Name         string     `json:"client_name"`
	URI          string     `json:"client_uri,omitempty"`
	RedirectURIs []string   `json:"redirect_uris"`
	CreatedAt    time.Time  `json:"created_at"`
}

// Grant is a person's consent that one OAuth client act for them in one
// workspace with one scope. It lasts until revoked (by the person, an admin,
// the client through /oauth/revoke, a reused refresh token, or the end of
// the membership); its tokens are short-lived and rotate.
type Grant struct {
	ID          string     `json:"id"`
	WorkspaceID string     `json:"workspace_id"`
	UserID      string     `json:"user_id"`
	UserEmail   string     `json:"user_email"`
	ClientID    string     `json:"client_id"`
	ClientName  string     `json:"client_name"`
	ClientKind  ClientKind `json:"client_kind"`
	Scope       Scope      `json:"scope"`
	// Resource is the protected resource (RFC 8707) the grant's tokens
	// are for: <PUBLIC_URL>/mcp.
	Resource   string     `json:"resource"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// GrantService lists and revokes OAuth grants ("Connected apps").
type GrantService interface {
	// Grants lists the live grants the actor may see: every grant of the
	// workspace for an admin, their own otherwise.
	Grants(ctx context.Context, a *Actor) ([]Grant, error)
	// RevokeGrant ends a grant at once on every replica (its owner or an
	// admin; another member's grant is ENotFound to a member).
	RevokeGrant(ctx context.Context, a *Actor, id string) error
}

// ConsentPage is what the authorization server asks the dashboard to show
// when a client asks a signed-in person for access: enough for the person
// to know which gateway asks, which app, how the gateway knows it, what it
// asks for, and where the browser goes next.
type ConsentPage struct {
	Client OAuthClient
	// RedirectHost is where the person's browser goes after the choice;
	// RedirectLoopback says it is an app on this computer (a loopback
	// redirect URI), not a website.
	RedirectHost     string
	RedirectLoopback bool
	// SelfRegistered warns that the client's name is only its own claim;
	// otherwise DocumentHost is the host of its client ID metadata
	// document, which vouches for it.
	SelfRegistered bool
	DocumentHost   string
	// Resource is what the app's tokens are for (the MCP endpoint).
	Resource   string
	Workspaces []Workspace
	// ReadOnly: the client asked only for read-only access, which is then
	// preselected and the most the person can grant.
	ReadOnly bool
	// Action is the form's target; Fields are its hidden fields (the
	// authorization request and the CSRF token).
	Action string
	Fields map[string]string
}
