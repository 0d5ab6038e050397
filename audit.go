package mcpgate

import (
	"strings"
	"time"
)

// AuditKind says whether an audit event is a tool call or an admin action.
type AuditKind string

// The audit kinds.
const (
	KindToolCall AuditKind = "tool_call"
	KindAdmin    AuditKind = "admin"
)

// AdminAction names an admin event in the audit log. Tool calls are named by
// their tool instead.
type AdminAction string

// The admin actions, each recorded by the service that performs it.
const (
	ActionCredentialStored   AdminAction = "credential.stored"
	ActionCredentialReplaced AdminAction = "credential.replaced"
	ActionCredentialRejected AdminAction = "credential.rejected"
	ActionCredentialRemoved  AdminAction = "credential.removed"
	ActionKeyCreated         AdminAction = "key.created"
	ActionKeyRevoked         AdminAction = "key.revoked"
	ActionToolEnabled        AdminAction = "tool.enabled"
	ActionToolDisabled       AdminAction = "tool.disabled"
	ActionToolUpdated        AdminAction = "tool.updated"
	ActionMemberRoleChanged  AdminAction = "member.role_changed"
	ActionMemberRemoved      AdminAction = "member.removed"
	ActionInvitationCreated  AdminAction = "invitation.created"
	ActionInvitationDeleted  AdminAction = "invitation.withdrawn"
	ActionInvitationAccepted AdminAction = "invitation.accepted"
	// ActionPasswordChanged is recorded in the person's personal workspace.
	ActionPasswordChanged AdminAction = "account.password_changed"
	// ActionPasswordReset is a password set through an emailed reset link.
	ActionPasswordReset AdminAction = "account.password_reset"
	// ActionKeysRevokedAll is every MCP key of a person revoked at once
	// (offered after a password reset).
	ActionKeysRevokedAll AdminAction = "account.keys_revoked"
	// ActionMailSent is an email the gateway sent (or gave up sending) to
	// the person: its kind, never its link.
	ActionMailSent AdminAction = "account.mail_sent"
	// ActionEmailVerified is a person confirming their address by its link.
	ActionEmailVerified AdminAction = "account.email_verified"
	// ActionSessionsEnded is a person signing out one or all other of
	// their dashboard sessions.
	ActionSessionsEnded AdminAction = "account.sessions_ended"
	// ActionEmailChanged is a new address confirmed and put in place.
	ActionEmailChanged AdminAction = "account.email_changed"
	// ActionAccountDeleted is recorded, without an actor, in each shared
	// workspace a deleted person was in.
	ActionAccountDeleted AdminAction = "account.deleted"
)

// AdminActions lists every admin action, in the order a filter shows them.
var AdminActions = []AdminAction{
	ActionCredentialStored, ActionCredentialReplaced, ActionCredentialRejected, ActionCredentialRemoved,
	ActionKeyCreated, ActionKeyRevoked, ActionToolEnabled, ActionToolDisabled, ActionToolUpdated,
	ActionMemberRoleChanged, ActionMemberRemoved, ActionInvitationCreated, ActionInvitationDeleted, ActionInvitationAccepted,
	ActionPasswordChanged, ActionPasswordReset, ActionKeysRevokedAll, ActionMailSent, ActionEmailVerified, ActionSessionsEnded, ActionEmailChanged, ActionAccountDeleted,
}

// Outcome is how a tool call or admin action ended.
type Outcome string

// The outcomes recorded in the audit log.
const (
	OutcomeOK        Outcome = "ok"
	OutcomeError     Outcome = "error"
	OutcomeDenied    Outcome = "denied"
	OutcomeConfirm   Outcome = "confirmation_required"
	OutcomeCancelled Outcome = "cancelled"
)

// Outcomes lists every outcome, in the order a filter shows them.
var Outcomes = []Outcome{OutcomeOK, OutcomeError, OutcomeDenied, OutcomeConfirm, OutcomeCancelled}

// AuditEvent is one row of the audit log: a tool call or an admin action.
// Arguments are stored already redacted.
type AuditEvent struct {
	ID             int64          `json:"id"`
	WorkspaceID    string         `json:"workspace_id"`
	ActorID        string         `json:"actor_id,omitempty"`
	ActorEmail     string         `json:"actor_email,omitempty"`
	KeyID          string         `json:"key_id,omitempty"`
	Kind           AuditKind      `json:"kind"`
	Action         string         `json:"action"`
	Arguments      map[string]any `json:"arguments,omitempty"`
	Outcome        Outcome        `json:"outcome"`
	Message        string         `json:"message,omitempty"`
	UpstreamStatus int            `json:"upstream_status,omitempty"`
	DurationMS     float64        `json:"duration_ms"`
	Source         Source         `json:"source,omitempty"`
	CreatedAt      time.Time      `json:"created_at"`
}

// NewAdminEvent is the one way an admin action becomes an audit event: by
// the actor, in the actor's workspace, with its arguments redacted like a
// tool call's.
func NewAdminEvent(a *Actor, action AdminAction, args map[string]any) AuditEvent {
	return AuditEvent{WorkspaceID: a.WorkspaceID, ActorID: a.UserID, KeyID: a.KeyID, Kind: KindAdmin,
		Action: string(action), Arguments: RedactArguments(args), Outcome: OutcomeOK, Source: a.Source}
}

// NewToolEvent returns the audit event of a call of tool by the actor, with
// its arguments redacted; the caller fills in the outcome.
func NewToolEvent(a *Actor, tool string, args map[string]any) AuditEvent {
	return AuditEvent{WorkspaceID: a.WorkspaceID, ActorID: a.UserID, KeyID: a.KeyID, Kind: KindToolCall,
		Action: tool, Arguments: RedactArguments(args), Outcome: OutcomeOK, Source: a.Source}
}

// AuditFilter narrows an audit listing. Zero values do not filter.
type AuditFilter struct {
	ActorID string // only this user's events
	Action  string // a tool name or admin action
	Kind    AuditKind
	Outcome Outcome
	Since   time.Time
	Until   time.Time
	Cursor  string // the next_cursor of the previous page
	Limit   int
}

// HourCount is the number of tool calls, and of failed ones, in the hour
// starting at Hour.
type HourCount struct {
	Hour   time.Time
	Calls  int
	Errors int
}

// Redacted replaces a value that must not be stored.
const Redacted = "[redacted]"

// confirmationArg is the two-step confirmation's extra argument; it is a
// one-time secret and never stored.
const confirmationArg = "confirmation_token"

// sensitiveArgName reports whether an argument's value must not be stored:
// environment variables and anything named like a credential. Names ending
// in _id or _hint (key_id, key_hint) name a credential without holding it.
func sensitiveArgName(name string) bool {
	n := strings.ToLower(name)
	if strings.HasSuffix(n, "_id") || strings.HasSuffix(n, "_hint") {
		return false
	}
	for _, s := range []string{"env", "secret", "token", "password", "key", "auth", "credential"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// RedactArguments returns a copy of a call's arguments safe for the audit
// log: values of sensitive arguments are replaced (the names are kept, so the
// log still says which were given), and long strings are cut.
func RedactArguments(args map[string]any) map[string]any {
	if len(args) == 0 {
		return nil
	}
	out := make(map[string]any, len(args))
	for k, v := range args {
		if k == confirmationArg {
			continue
		}
		if sensitiveArgName(k) {
			if m, ok := v.(map[string]any); ok {
				r := make(map[string]any, len(m))
				for mk := range m {
					r[mk] = Redacted
				}
				out[k] = r
			} else {
				out[k] = Redacted
			}
			continue
		}
		if s, ok := v.(string); ok && len(s) > 256 {
			v = s[:256] + "…"
		}
		out[k] = v
	}
	return out
}
