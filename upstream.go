package mcpgate

import (
	"context"
	"encoding/json"
	"time"
)

// An upstream server is a remote MCP server (streamable HTTP) a workspace
// adds as a connector of its own: the gateway is its client, discovers its
// tools, and publishes them under the workspace's policy. Its credential
// headers are sealed in the vault and answered only as hints.

// ServerHealth says how the gateway's last exchange with a server went.
type ServerHealth string

// The health states.
const (
	// HealthOK: the server is up: the last discovery, probe or call
	// reached it.
	HealthOK ServerHealth = "ok"
	// HealthError: the server is down since DownSince (a failed discovery
	// or probe, or consecutive calls that could not reach it); LastError
	// says why. Its tools are left out of every tool set until a probe
	// reaches it again.
	HealthError ServerHealth = "error"
)

// Server is an upstream MCP server as the API and the dashboard show it.
type Server struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// Headers are the credential headers by name, each with a hint of its
	// value; the value is never answered.
	Headers          []HeaderHint `json:"headers"`
	Enabled          bool         `json:"enabled"`
	SessionScope     SessionScope `json:"session_scope"`
	Health           ServerHealth `json:"health"`
	LastError        string       `json:"last_error,omitempty"`
	LastDiscoveredAt *time.Time   `json:"last_discovered_at,omitempty"`
	// DownSince is when the server went down (health "error"); nil while
	// it is up.
	DownSince *time.Time `json:"down_since,omitempty"`
	// NextCheckAt is when the gateway next probes the server (while down)
	// or re-discovers it (while up and enabled).
	NextCheckAt     *time.Time `json:"next_check_at,omitempty"`
	ProtocolVersion string     `json:"protocol_version,omitempty"`
	// ServerInfo is the name and version the server gave in initialize.
	ServerInfo ServerInfo `json:"server_info"`
	// ToolCount counts the tools the last discovery listed; EnabledTools
	// those of them turned on; Quarantined those whose definition changed
	// after an admin trusted it, waiting for an admin's approval.
	ToolCount    int `json:"tool_count"`
	EnabledTools int `json:"enabled_tools"`
	Quarantined  int `json:"quarantined"`
	// NameProblems counts tools that have no exposed name (too long, or
	// taken): each needs an alias.
	NameProblems int `json:"name_problems"`
	// Tools are the server's tools; filled in when one server is read.
	Tools []ServerTool `json:"tools,omitempty"`
	// Credential is the credential kind: CredentialNone, CredentialHeaders
	// or CredentialOAuth; OAuth says, for the last, whether and how the
	// server is connected.
	Credential string             `json:"credential"`
	OAuth      *ServerOAuthStatus `json:"oauth,omitempty"`
	// AllowSampling and AllowRoots let the server's sampling/createMessage
	// (the person's AI client runs a model prompt) and roots/list (the
	// client's root folders) reach the client during a call; both off
	// unless an admin turns them on, and deprecated in 2026-07-28.
	// Elicitation in form mode is always relayed; in URL mode only to a
	// host of ElicitationURLHosts (see ElicitationHostAllowed).
	AllowSampling       bool     `json:"allow_sampling"`
	AllowRoots          bool     `json:"allow_roots"`
	ElicitationURLHosts []string `json:"elicitation_url_hosts"`
	// ElicitationHostsSeen are the hosts the server's URL-mode
	// elicitations named, allowed or not, the most recently seen first;
	// filled in when one server is read.
	ElicitationHostsSeen []ElicitationHost `json:"elicitation_hosts_seen,omitempty"`
	CreatedAt            time.Time         `json:"created_at"`
	UpdatedAt            time.Time         `json:"updated_at"`
}

// ServerInfo is what a server says it is.
type ServerInfo struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
}

// HeaderHint names a credential header and hints at its value (its last
// few characters), so an admin can tell two credentials apart.
type HeaderHint struct {
	Name string `json:"name"`
	Hint string `json:"hint"`
}

// ServerTool is one tool of an upstream server as the workspace holds it.
type ServerTool struct {
	// Name is the tool's name as the server gave it.
	Name string `json:"name"`
	// ExposedName is the name the workspace endpoint publishes it under
	// ("<server>_<tool>", or Alias); empty when it has none, and
	// NameProblem says why.
	ExposedName string `json:"exposed_name,omitempty"`
	Alias       string `json:"alias,omitempty"`
	NameProblem string `json:"name_problem,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Enabled     bool   `json:"enabled"`
	// Approval is the call's approval mode, as for a connector's tools.
	Approval Approval `json:"approval"`
	// Pinned is set while an admin's trust in the definition stands: the
	// definition it was given for is kept as a hash, and a changed one is
	// quarantined.
	Pinned bool `json:"pinned"`
	// Quarantined tools are neither listed nor callable until an admin
	// approves Change.
	Quarantined bool `json:"quarantined"`
	// Listed is false for a tool the last discovery no longer found; its
	// settings and pin are kept in case it comes back.
	Listed bool `json:"listed"`
	// Annotations are the hints as declared: a nil hint was not declared,
	// which is not the same as false.
	Annotations ToolHints `json:"annotations"`
	// Definition is the definition in force (the pinned one while
	// quarantined), as the server gave it.
	Definition json.RawMessage `json:"definition,omitempty"`
	// Change is what a quarantined tool's new definition changes.
	Change *ToolChange `json:"change,omitempty"`
}

// ToolHints are a tool's declared annotation hints; nil: not declared.
type ToolHints struct {
	ReadOnly    *bool `json:"readOnlyHint,omitempty"`
	Destructive *bool `json:"destructiveHint,omitempty"`
	Idempotent  *bool `json:"idempotentHint,omitempty"`
	OpenWorld   *bool `json:"openWorldHint,omitempty"`
}

// ToolChange is a changed definition waiting for an admin: the members of
// the definition that changed, every hint that now claims less risk, the
// new definition itself and its pin. Approving names the pin, so that
// only the change the admin reviewed is trusted.
type ToolChange struct {
	Pin        string          `json:"pin"`
	Fields     []string        `json:"fields"`
	Loosened   []HintLoosened  `json:"loosened,omitempty"`
	Definition json.RawMessage `json:"definition"`
}

// HintLoosened is a hint whose new value claims less risk than the old
// (nil: not declared).
type HintLoosened struct {
	Hint   string `json:"hint"`
	Before *bool  `json:"before"`
	After  *bool  `json:"after"`
}

// ServerInput adds a server. Headers carry its credential (none, or e.g.
// Authorization or X-API-Key); their values are Secrets, so that no log or
// error shows them. Aliases give exposed names to tools (by their own
// name) whose generated one is too long or taken.
type ServerInput struct {
	Name    string            `json:"name"`
	URL     string            `json:"url"`
	Headers map[string]Secret `json:"headers"`
	Aliases map[string]string `json:"aliases"`
	// Credential "oauth" adds a server that answers 401 with
	// protected-resource metadata: it is connected afterwards (Connect),
	// and Headers must be empty. "" or "none"/"headers": as Headers say.
	Credential string `json:"credential,omitempty"`
	// PerPerson (with "oauth"): each member connects their own account.
	PerPerson bool `json:"per_person,omitempty"`
	// OAuthClientID and OAuthClientSecret (with "oauth") are a client an
	// admin registered at the authorization server by hand, with the
	// gateway's redirect URI, for one that takes neither Dynamic Client
	// Registration nor client ID metadata documents; empty: the gateway
	// registers itself. The secret may be empty (a public client).
	OAuthClientID     string `json:"oauth_client_id,omitempty"`
	OAuthClientSecret Secret `json:"oauth_client_secret,omitempty"`
}

// ServerUpdate changes a server; nil members are left as they are.
// Headers, when given, is the whole new set: a header given with an empty
// value keeps its stored value, a stored header left out is removed.
// Aliases, when given, replaces every alias ("" removes one).
type ServerUpdate struct {
	URL     *string           `json:"url"`
	Headers map[string]Secret `json:"headers"`
	Aliases map[string]string `json:"aliases"`
	Enabled *bool             `json:"enabled"`
	// PerPerson switches an OAuth server between one grant for the
	// workspace and each member's own; the grants of the other kind go.
	PerPerson *bool `json:"per_person"`
	// SessionScope, when set, changes how the gateway scopes its sessions
	// with the server.
	SessionScope *SessionScope `json:"session_scope"`
	// AllowSampling and AllowRoots, when set, turn the relay of the
	// server's sampling and roots requests on or off; ElicitationURLHosts,
	// when given, is the whole new allow-list of URL-mode elicitation
	// hosts (NormalizeElicitationHosts; [] empties it).
	AllowSampling       *bool     `json:"allow_sampling"`
	AllowRoots          *bool     `json:"allow_roots"`
	ElicitationURLHosts *[]string `json:"elicitation_url_hosts"`
}

// ServerService manages a workspace's upstream servers. Everyone in the
// workspace may read them; owners and admins (under the workspace's
// two-factor policy) change them. Adding, changing, enabling and
// re-discovering a server connect to it, and what cannot be reached or
// understood is refused with the reason, nothing stored.
type ServerService interface {
	Servers(ctx context.Context, a *Actor) ([]Server, error)
	// Server returns one server with its tools.
	Server(ctx context.Context, a *Actor, name string) (*Server, error)
	AddServer(ctx context.Context, a *Actor, in ServerInput) (*Server, error)
	UpdateServer(ctx context.Context, a *Actor, name string, upd ServerUpdate) (*Server, error)
	RemoveServer(ctx context.Context, a *Actor, name string) error
	// DiscoverServer lists the server's tools again. New tools arrive off
	// (unless declared read-only); a tool an admin trusted whose
	// definition changed is quarantined.
	DiscoverServer(ctx context.Context, a *Actor, name string) (*Server, error)
	// ApproveServerTool accepts a quarantined tool's new definition: it is
	// pinned, and the tool is back as it was set. expectedPin is the pin of
	// the change the admin reviewed (ToolChange.Pin); if the change waiting
	// is another one, nothing changes and the answer is EConflict.
	ApproveServerTool(ctx context.Context, a *Actor, server, tool, expectedPin string) (*Server, error)
	// SetServerTool turns a tool on or off and sets its approval mode.
	// Turning one on pins its definition as it stands.
	SetServerTool(ctx context.Context, a *Actor, server, tool string, upd ToolUpdate) (*Server, error)
}
