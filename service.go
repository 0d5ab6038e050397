package mcpgate

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// The services are the gateway's rules: who may see and change what, what
// is audited, how a tool call runs. The JSON API, the dashboard and the MCP
// endpoint are three front doors onto them and decide nothing themselves.
// internal/service implements them on the store and the vault.

// AccountService creates accounts and checks passwords.
type AccountService interface {
	// Signup creates an account. With an invitation token it also joins
	// that workspace (the invitation's email must match); in invite-only
	// mode an invitation is required. Sign-ups are throttled per client
	// address. Where addresses must be confirmed (SIGNUP_VERIFY=required)
	// it returns no user and no error: the account is made when the link
	// mailed to the address is opened (VerifyEmail), and an address that
	// has an account already gets a note instead, with the same answer.
	Signup(ctx context.Context, email, password, invitation, address string) (*User, error)
	// Login checks an email and password, and for a person who signs in
	// with two factors a TOTP or recovery code, under the login throttle,
	// counted per email and address pair, per address, and per email (wrong
	// codes count like wrong passwords). The right password without a code
	// from such a person is ETOTPRequired.
	Login(ctx context.Context, c Credentials, address string) (*User, error)
	// ChangePassword replaces the user's password once the current one is
	// given (wrong ones count against the login throttle) and ends every
	// session of theirs; the caller starts a new one for this browser.
	ChangePassword(ctx context.Context, u *User, current, newPassword, address string) error
	// MailEnabled reports whether the instance can send email (SMTP_URL);
	// without it, reset and verification links cannot be sent.
	MailEnabled() bool
	// EmailVerificationRequired reports whether a person must confirm their
	// address before accepting invitations or creating MCP keys
	// (SIGNUP_VERIFY=required, which needs SMTP_URL).
	EmailVerificationRequired() bool
	// RequestPasswordReset emails a single-use reset link to the address if
	// it has an account, and answers the same either way; it is throttled
	// per address and per client address.
	RequestPasswordReset(ctx context.Context, email, address string) error
	// ResetPassword sets a new password with a reset link's token, ending
	// every session of the person and, with revokeKeys, revoking every MCP
	// key and OAuth grant they hold. Two-factor sign-in stays as it was.
	ResetPassword(ctx context.Context, token, newPassword string, revokeKeys bool) error
	// EmailVerified reports whether the person has confirmed their address.
	EmailVerified(ctx context.Context, u *User) (bool, error)
	// VerifyEmail confirms an address with the token of its emailed link;
	// the link of a sign-up that waits for it creates the account.
	VerifyEmail(ctx context.Context, token string) (*User, error)
	// ResendVerification emails a new verification link (throttled).
	ResendVerification(ctx context.Context, u *User) error
	// ChangeEmail sends a confirmation link to a new address once the
	// current password is given; the address changes only when the link is
	// opened, and the old address is then told.
	ChangeEmail(ctx context.Context, u *User, newEmail, currentPassword, address string) error
	// DeleteAccount deletes the person once the current password is given;
	// refused while they are the last owner of a workspace with other
	// members. Their keys and sessions end; their audit rows in shared
	// workspaces stay, the actor shown as deleted.
	DeleteAccount(ctx context.Context, u *User, currentPassword, address string) error
	// Sessions lists the person's live dashboard sessions, newest first,
	// marking currentID; nobody sees another person's.
	Sessions(ctx context.Context, u *User, currentID string) ([]Session, error)
	// EndSession signs out one of the person's sessions; another person's
	// is ENotFound.
	EndSession(ctx context.Context, u *User, id string) error
	// EndOtherSessions signs out every session of the person but currentID
	// and returns how many ended.
	EndOtherSessions(ctx context.Context, u *User, currentID string) (int, error)
}

// TwoFactorService manages a person's two-factor sign-in (TOTP and
// recovery codes); the login that checks the second factor is
// AccountService.Login.
type TwoFactorService interface {
	// TOTPEnabled reports whether the person signs in with a second factor.
	TOTPEnabled(ctx context.Context, u *User) (bool, error)
	// BeginTOTP starts two-factor enrolment once the current password is
	// given: a new secret, pending until ConfirmTOTP, replacing a pending
	// one. Refused (EConflict) while two-factor sign-in is on.
	BeginTOTP(ctx context.Context, u *User, currentPassword, address string) (*TOTPEnrollment, error)
	// ConfirmTOTP turns two-factor sign-in on with a first code from the
	// pending secret and returns the one-time recovery codes, which are
	// shown this once and stored only as hashes.
	ConfirmTOTP(ctx context.Context, u *User, code string) ([]string, error)
	// DisableTOTP turns two-factor sign-in off once the current password and
	// a current TOTP code or an unused recovery code are given (both checked
	// under the login throttle).
	DisableTOTP(ctx context.Context, u *User, code, currentPassword, address string) error
	// NewRecoveryCodes replaces the person's recovery codes with new ones,
	// checked like DisableTOTP; the old ones stop working at once. The new
	// codes are shown this once.
	NewRecoveryCodes(ctx context.Context, u *User, code, currentPassword, address string) ([]string, error)
}

// Credentials are what a person gives to sign in: the email and password,
// and for a person who signs in with two factors either a code from their
// authenticator app or one of their recovery codes.
type Credentials struct {
	Email        string
	Password     string
	TOTPCode     string
	RecoveryCode string
}

// TOTPEnrollment is a pending two-factor enrolment as the person sees it
// once: the shared secret for typing in, the otpauth:// URL that carries it,
// and that URL as a QR code (PNG) for scanning.
type TOTPEnrollment struct {
	Secret    Secret
	URL       Secret
	QRCodePNG []byte
	Issuer    string
	Account   string
}

// WorkspaceService manages workspaces, members and invitations.
type WorkspaceService interface {
	// Enter returns the actor a signed-in user is in one of their
	// workspaces, with their role, and the workspace as they see it. A
	// workspace they are not in is ENotFound, as if it did not exist.
	Enter(ctx context.Context, u *User, workspaceID string, source Source) (*Actor, *Workspace, error)
	// EnterToGrant is Enter for a person about to give an app access to
	// the workspace (OAuth consent): an owner or admin is held to the
	// workspace's two-factor policy, as for any admin change.
	EnterToGrant(ctx context.Context, u *User, workspaceID string) (*Actor, *Workspace, error)
	// Workspaces lists the user's workspaces with their role in each.
	Workspaces(ctx context.Context, u *User) ([]Workspace, error)
	CreateWorkspace(ctx context.Context, u *User, name string) (*Workspace, error)
	Members(ctx context.Context, a *Actor) ([]Member, error)
	// SetMemberRole changes a member's role (admins; the owner role only
	// by an owner).
	SetMemberRole(ctx context.Context, a *Actor, userID string, role Role) (*Member, error)
	// RemoveMember removes a member (admins; an owner only by an owner);
	// anyone may remove themselves.
	RemoveMember(ctx context.Context, a *Actor, userID string) error
	// Invite creates an invitation (admins) and returns it with its token,
	// which is shown once and stored only as a hash.
	Invite(ctx context.Context, a *Actor, email string, role Role) (*Invitation, string, error)
	Invitations(ctx context.Context, a *Actor) ([]Invitation, error)
	DeleteInvitation(ctx context.Context, a *Actor, id string) error
	// UpdateWorkspace changes a workspace's settings (owners only); fields
	// left nil keep their value. Requiring two-factor sign-in of owners and
	// admins is refused unless the owner making the change has it on.
	// Only an owner may change them.
	UpdateWorkspace(ctx context.Context, a *Actor, u WorkspaceUpdate) (*Workspace, error)
	// FindInvitation returns the open invitation a token belongs to.
	FindInvitation(ctx context.Context, token string) (*Invitation, error)
	AcceptInvitation(ctx context.Context, u *User, token string) (*Workspace, error)
}

// WorkspaceUpdate changes a workspace's settings; nil fields keep their
// value.
type WorkspaceUpdate struct {
	RequireTwoFactor *bool
	ApprovalFourEyes *bool
	// ApprovalWaitSeconds is Workspace.ApprovalWaitSeconds, 0 to
	// MaxApprovalWaitSeconds.
	ApprovalWaitSeconds *int
}

// KeyService manages MCP keys.
type KeyService interface {
	// CreateKey creates a key owned by the actor and returns it with the
	// key itself, which is shown once and stored only as a hash.
	CreateKey(ctx context.Context, a *Actor, k NewKey) (*APIKey, string, error)
	// Keys lists the keys the actor may see: every key of the workspace
	// for an admin, their own otherwise.
	Keys(ctx context.Context, a *Actor) ([]APIKey, error)
	// RevokeKey revokes a key (its owner or an admin; another member's key
	// is ENotFound to a member).
	RevokeKey(ctx context.Context, a *Actor, id string) error
}

// NewKey is what a person asks for when creating a key.
type NewKey struct {
	Name      string
	Scope     Scope // default full
	ExpiresAt *time.Time
}

// ConnectionService stores and checks a workspace's upstream credentials.
type ConnectionService interface {
	// Connection returns what may be shown of the stored credential.
	Connection(ctx context.Context, a *Actor, connector string) (*Connection, error)
	// PutConnection checks a credential with its connector and only if it
	// is accepted seals and stores it (admins), replacing any previous one.
	PutConnection(ctx context.Context, a *Actor, connector string, credential Secret) (*Connection, error)
	DeleteConnection(ctx context.Context, a *Actor, connector string) error
}

// ToolService lists, configures and calls a workspace's tools.
type ToolService interface {
	// Tools lists every tool with the workspace's settings.
	Tools(ctx context.Context, a *Actor) ([]ToolInfo, error)
	// ToolSet returns the tools the actor may call now, as one immutable
	// value that is replaced when the workspace's policy changes.
	ToolSet(ctx context.Context, a *Actor) (*ToolSet, error)
	// UpdateTool changes a workspace's setting for one tool (admins);
	// fields left nil keep their value.
	UpdateTool(ctx context.Context, a *Actor, name string, u ToolUpdate) (*ToolInfo, error)
	// CallTool runs a tool under the workspace's policy and the actor's
	// scope, and audits it. A tool that needs confirmation runs only when
	// the call says it was confirmed; otherwise the error is a
	// *ConfirmationRequiredError. It returns the tool's output as JSON; for
	// an upstream server's tool (ToolInfo.Server) that is the server's
	// tools/call result exactly as it came, to be relayed unchanged.
	CallTool(ctx context.Context, a *Actor, call ToolCall) (json.RawMessage, error)
}

// ToolUpdate changes a tool's policy; nil fields keep their value.
type ToolUpdate struct {
	Enabled  *bool
	Approval *Approval
}

// ToolCall is one call of a tool.
type ToolCall struct {
	Tool      string
	Arguments json.RawMessage
	// Confirmed says the call was confirmed: in a dashboard dialog, or by a
	// confirmation the MCP endpoint checked. It satisfies a human
	// approval only when the actor is a person (Actor.IsPerson).
	Confirmed bool
	// ApprovalID names the approval a person gave in the dashboard for
	// exactly this call; it is used up by the call.
	ApprovalID string
	// ContinuesApproval names the approval a call this one continues was
	// made with: a retry that answers an upstream tool's input requests
	// (2026-07-28), whose sealed request state, bound to the caller, the
	// tool and the arguments, carries it (the front door opens it). The
	// approval was used up by that call and covers its retries while the
	// state is valid: the person is not asked again for the same call.
	ContinuesApproval string
	// RequestState and InputResponses are a retry's answer to an upstream
	// tool's input_required result (2026-07-28): the upstream's own request
	// state, unwrapped by the front door from its sealed envelope, and the
	// caller's inputResponses, raw. Empty on a first call.
	RequestState   string
	InputResponses json.RawMessage
}

// ConfirmationRequiredError is CallTool's answer for a call that needs
// confirmation and was not confirmed. Nothing ran; it says what would have.
type ConfirmationRequiredError struct {
	Tool ToolInfo
	// Arguments are the call's arguments as they would run (defaults
	// applied); a confirmation must be bound to exactly these.
	Arguments map[string]any
	// Summary says in one sentence what the call would do.
	Summary string
}

// Error implements error.
func (e *ConfirmationRequiredError) Error() string { return "this action needs confirmation" }

// Unwrap gives the error its code: a conflict until confirmed.
func (e *ConfirmationRequiredError) Unwrap() error {
	return Errorf(EConflict, "this action needs confirmation")
}

// ToolSet is the tools one scope may call in a workspace under one version
// of its policy. It is immutable: a policy change makes a new one, so a front
// door may cache what it derives from it (an MCP server) on the value.
type ToolSet struct {
	WorkspaceID string
	Scope       Scope
	// Tools are the tools the scope may call, in the registry's order.
	Tools []ToolInfo
	// All is every tool with its settings, callable or not, by name.
	All map[string]ToolInfo

	once    sync.Once
	derived any
}

// Derive returns what build makes of the set, building it once per set: a
// front door keeps what it derives from the immutable value (an MCP server)
// on the value itself. A set keeps one derived value, the first asked for;
// a caller deriving another type from the same set gets its own each time,
// never a value of the wrong type.
func Derive[T any](s *ToolSet, build func(*ToolSet) T) T {
	s.once.Do(func() { s.derived = build(s) })
	if v, ok := s.derived.(T); ok {
		return v
	}
	return build(s)
}

// AuditService reads the audit log.
type AuditService interface {
	// Audit pages the log: every event for an admin, their own for a
	// member (whatever actor the filter asks for).
	Audit(ctx context.Context, a *Actor, f AuditFilter) ([]AuditEvent, string, error)
	// Export calls fn with every event Audit would list for f, oldest
	// first, without holding them in memory, and records the export.
	Export(ctx context.Context, a *Actor, f AuditFilter, fn func(*AuditEvent) error) (int, error)
	// CallsPerHour counts tool calls and failed ones per hour since the
	// given time, under the same visibility as Audit; userID, for an admin,
	// narrows it to one member, and source ("" for all) to one front door.
	CallsPerHour(ctx context.Context, a *Actor, userID string, source Source, since time.Time) ([]HourCount, error)
}
