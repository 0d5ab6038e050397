package mcpgate

import (
	"encoding/json"
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"
)

// Role is a member's role in a workspace.
type Role string

// The roles, from most to least powerful.
const (
	RoleOwner  Role = "owner"
	RoleAdmin  Role = "admin"
	RoleMember Role = "member"
)

// Valid reports whether r is one of the known roles.
func (r Role) Valid() bool { return r == RoleOwner || r == RoleAdmin || r == RoleMember }

// CanAdmin reports whether r may manage the workspace: members, invitations,
// tool policy, credentials and every key.
func (r Role) CanAdmin() bool { return r == RoleOwner || r == RoleAdmin }

// User is a person with a dashboard login.
type User struct {
	ID            string    `json:"id"`
	Email         string    `json:"email"`
	InstanceAdmin bool      `json:"instance_admin,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
}

// Session is one dashboard sign-in of a person, as they see it in their
// account settings.
type Session struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Address is the client address at sign-in; UserAgent the browser's
	// own description, cut to a bounded length.
	Address   string `json:"address"`
	UserAgent string `json:"user_agent"`
	// Current marks the session of the request that listed them.
	Current bool `json:"current"`
}

// Workspace is a tenant. Every credential, key, policy and audit row belongs
// to exactly one.
type Workspace struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Personal  bool      `json:"personal"`
	CreatedAt time.Time `json:"created_at"`
	// RequireTwoFactor is the owners' policy that owners and admins must
	// have two-factor sign-in on before they change tools, approvals,
	// guardrails or credentials.
	RequireTwoFactor bool `json:"require_two_factor"`
	// ApprovalFourEyes is the owners' rule that the person who decides an
	// approval request must be someone other than the person whose key or
	// app asked for it.
	ApprovalFourEyes bool `json:"approval_four_eyes"`
	// ApprovalWaitSeconds is how long a tool call that needs a person's
	// approval holds open for the decision before it answers with the
	// approval's link (0: it answers at once; at most
	// MaxApprovalWaitSeconds).
	ApprovalWaitSeconds int `json:"approval_wait_seconds"`
	// Role is the viewing user's role in it, where it was read for a user.
	Role Role `json:"role,omitempty"`
}

// Member is a user's membership of a workspace.
type Member struct {
	WorkspaceID string    `json:"-"`
	UserID      string    `json:"user_id"`
	Email       string    `json:"email"`
	Role        Role      `json:"role"`
	JoinedAt    time.Time `json:"joined_at"`
}

// Invitation lets the holder of its token join a workspace with a role.
type Invitation struct {
	ID          string     `json:"id"`
	WorkspaceID string     `json:"workspace_id"`
	Email       string     `json:"email"`
	Role        Role       `json:"role"`
	CreatedBy   string     `json:"created_by"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   time.Time  `json:"expires_at"`
	AcceptedAt  *time.Time `json:"accepted_at,omitempty"`
}

// Scope limits what an MCP key may call.
type Scope string

// The key scopes.
const (
	ScopeFull     Scope = "full"
	ScopeReadOnly Scope = "read_only"
)

// Valid reports whether s is a known scope.
func (s Scope) Valid() bool { return s == ScopeFull || s == ScopeReadOnly }

// APIKey is an MCP key's record. The secret itself is never stored; only its
// SHA-256 is, and the public ID finds the row.
type APIKey struct {
	ID          string     `json:"id"`
	WorkspaceID string     `json:"workspace_id"`
	UserID      string     `json:"owner_id"`
	OwnerEmail  string     `json:"owner_email,omitempty"`
	Name        string     `json:"name"`
	Scope       Scope      `json:"scope"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   *time.Time `json:"expires_at"`
	LastUsedAt  *time.Time `json:"last_used_at"`
	RevokedAt   *time.Time `json:"revoked_at"`
}

// Active reports whether the key may be used at now.
func (k *APIKey) Active(now time.Time) bool {
	return k.RevokedAt == nil && (k.ExpiresAt == nil || now.Before(*k.ExpiresAt))
}

// ToolPolicy is a workspace's setting for one tool.
type ToolPolicy struct {
	Tool     string   `json:"name"`
	Enabled  bool     `json:"enabled"`
	Approval Approval `json:"approval"`
}

// ToolInfo is a tool as a workspace sees it: its description and
// annotations with the workspace's settings applied.
type ToolInfo struct {
	Name        string         `json:"name"`
	Connector   string         `json:"connector"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Enabled     bool           `json:"enabled"`
	Approval    Approval       `json:"approval"`
	CostsMoney  bool           `json:"costs_money"`
	ReadOnly    bool           `json:"read_only"`
	Destructive bool           `json:"destructive"`
	Annotations map[string]any `json:"annotations"`
	// OffByDefault marks a tool a new workspace has turned off (E2B's
	// kill): the dashboard guards its switch.
	OffByDefault bool `json:"-"`
	// Server names the upstream MCP server a tool belongs to ("" for a
	// connector's tool); ServerTool is its name there, and Definition the
	// definition in force exactly as the server gave it, which the MCP
	// endpoint publishes (with Name as its name). Annotations then hold
	// the hints as the server declared them: an undeclared one is absent.
	Server     string          `json:"server,omitempty"`
	ServerTool string          `json:"server_tool,omitempty"`
	Definition json.RawMessage `json:"definition,omitempty"`
}

// Connection is a workspace's stored credential for one connector. The
// ciphertext never leaves the store and vault; this type carries only what may
// be shown.
type Connection struct {
	WorkspaceID  string     `json:"-"`
	Connector    string     `json:"connector"`
	KeyHint      string     `json:"key_hint"`
	VerifiedAt   time.Time  `json:"verified_at"`
	UpdatedBy    string     `json:"updated_by"`
	UpdatedAt    time.Time  `json:"updated_at"`
	LastAuthFail *time.Time `json:"last_auth_failure,omitempty"`
}

// NormalizeEmail trims and lower-cases an address and checks its shape.
func NormalizeEmail(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" || len(s) > 254 || !utf8.ValidString(s) {
		return "", Errorf(EInvalid, "a valid email address is required")
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || !strings.Contains(s[strings.LastIndexByte(s, '@')+1:], ".") {
		return "", Errorf(EInvalid, "a valid email address is required")
	}
	return s, nil
}

// MinPasswordLength is the shortest password accepted at signup.
const MinPasswordLength = 10

// ValidatePassword checks a new password.
func ValidatePassword(p string) error {
	if utf8.RuneCountInString(p) < MinPasswordLength {
		return Errorf(EInvalid, "the password must be at least %d characters", MinPasswordLength)
	}
	if len(p) > 1024 {
		return Errorf(EInvalid, "the password must be at most 1024 bytes")
	}
	return nil
}

// ValidateName checks a user-given name (workspace, key): 1 to 100
// characters, no control characters.
func ValidateName(what, s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || utf8.RuneCountInString(s) > 100 || !utf8.ValidString(s) {
		return "", Errorf(EInvalid, "%s must be 1 to 100 characters", what)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "", Errorf(EInvalid, "%s must not contain control characters", what)
		}
	}
	return s, nil
}
