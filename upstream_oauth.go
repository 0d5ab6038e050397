package mcpgate

import (
	"context"
	"time"
)

// OAuth to upstream servers: a server added with the credential kind
// "oauth" is connected by a person in their browser (the authorization
// code flow with PKCE, at the server's authorization server); the gateway
// seals the tokens and sends the access token on every exchange with the
// server, refreshing it as needed. Tokens are never answered, logged or
// audited.

// The gateway's routes for the client side of OAuth to upstreams
// (design.md §4): its client ID metadata document (its client_id where
// the authorization server takes them) and its redirect URI.
const (
	UpstreamClientDocumentPath = "/oauth/upstream-client.json"
	UpstreamCallbackPath       = "/oauth/upstream/callback"
)

// The credential kinds of an upstream server.
const (
	CredentialNone    = "none"
	CredentialHeaders = "headers"
	CredentialOAuth   = "oauth"
)

// The connection states of an OAuth server's grant.
const (
	// OAuthNotConnected: nobody has connected (the workspace's grant, or
	// the caller's own for a per-person server).
	OAuthNotConnected = "not_connected"
	// OAuthConnected: the gateway holds a grant it can use.
	OAuthConnected = "connected"
	// OAuthReconnectNeeded: the authorization server refused a refresh
	// (revoked or expired): someone must connect again.
	OAuthReconnectNeeded = "reconnect_needed"
)

// The OAuth admin actions: a grant connected (or reconnected), removed, and
// a refresh the authorization server refused. Their arguments name the
// server, the issuer and whose grant it is, never a token.
const (
	ActionServerConnected     AdminAction = "server.connected"
	ActionServerDisconnected  AdminAction = "server.disconnected"
	ActionServerRefreshFailed AdminAction = "server.refresh_failed"
	// ActionServerIssuerChanged is a server found sending its clients to
	// another authorization server, where the gateway registered again:
	// its grants from the old one are gone.
	ActionServerIssuerChanged AdminAction = "server.issuer_changed"
)

// ServerOAuthStatus is what the dashboard and the API show of an OAuth
// server's sign-in: never a token.
type ServerOAuthStatus struct {
	Issuer string `json:"issuer"`
	// Registration is how the gateway is registered there: "cimd" or "dcr".
	Registration string `json:"registration"`
	// PerPerson: each member connects their own account.
	PerPerson bool `json:"per_person"`
	// State is the grant the caller's calls use: the workspace's, or for a
	// per-person server the caller's own.
	State       string     `json:"state"`
	ConnectedAt *time.Time `json:"connected_at,omitempty"`
	// ExpiresAt is when the current access token expires.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// ConnectURL is the dashboard page where the grant is connected.
	ConnectURL string `json:"connect_url"`
}

// ServerConnect is an authorization request started: the browser goes to
// AuthorizeURL.
type ServerConnect struct {
	AuthorizeURL string `json:"authorize_url"`
}

// ServerConnected is where the browser goes back to after a connection.
type ServerConnected struct {
	WorkspaceID string
	Server      string
}

// ServerOAuthService connects OAuth servers. Connect starts the flow for
// the workspace's grant (admins) or, on a per-person server, for the
// caller's own (any member); sessionID binds it to the dashboard session
// that finishes it. FinishConnect takes the authorization server's answer
// at the gateway's callback, as the person of that session.
type ServerOAuthService interface {
	Connect(ctx context.Context, a *Actor, server, sessionID string) (*ServerConnect, error)
	FinishConnect(ctx context.Context, u *User, sessionID, state, code, issuer, errCode string) (*ServerConnected, error)
	// Disconnect removes the grant (the workspace's for an admin, the
	// caller's own on a per-person server) and revokes it at the
	// authorization server when it can.
	Disconnect(ctx context.Context, a *Actor, server string) error
	// ClientMetadataDocument is the gateway's client ID metadata document.
	ClientMetadataDocument() map[string]any
}
