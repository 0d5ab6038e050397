package mcpgate

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// AuditKind says whether an audit event is a tool call or an admin action.
type AuditKind string

// The audit kinds.
const (
	KindToolCall AuditKind = "tool_call"
	KindAdmin    AuditKind = "admin"
	// KindRefused aggregates the calls of one credential refused before
	// they reached a tool (rate limits): one row per credential and period.
	KindRefused AuditKind = "refused"
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
	ActionAuditExported      AdminAction = "audit.exported"
	ActionApprovalRequested  AdminAction = "approval.requested"
	ActionApprovalApproved   AdminAction = "approval.approved"
	ActionApprovalDenied     AdminAction = "approval.denied"
	ActionApprovalExpired    AdminAction = "approval.expired"
	ActionApprovalUsed       AdminAction = "approval.used"
	ActionGuardrailsUpdated  AdminAction = "guardrails.updated"
	ActionGuardrailRefused   AdminAction = "guardrail.refused"
	ActionGrantCreated       AdminAction = "grant.created"
	ActionGrantRevoked       AdminAction = "grant.revoked"
	// ActionPasswordChanged is recorded in the person's personal workspace.
	ActionPasswordChanged AdminAction = "account.password_changed"
	// ActionPasswordReset is a password set through an emailed reset link.
	ActionPasswordReset AdminAction = "account.password_reset"
	// ActionKeysRevokedAll is every MCP key of a person revoked at once
	// (offered after a password reset), and their OAuth grants: the
	// arguments count and grants say how many (not "keys", a name the
	// redaction hides).
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
	// ActionTOTPEnrolmentStarted is a person starting (or restarting) to
	// set up two-factor sign-in; never with the secret.
	ActionTOTPEnrolmentStarted AdminAction = "account.totp_enrolment_started"
	// ActionTOTPEnabled is two-factor sign-in turned on by a confirmed
	// first code; never with the recovery codes.
	ActionTOTPEnabled AdminAction = "account.totp_enabled"
	// ActionTOTPDisabled is two-factor sign-in turned off.
	ActionTOTPDisabled AdminAction = "account.totp_disabled"
	// ActionRecoveryCodeUsed is a one-time recovery code spent (at login or
	// to turn two-factor off), with how many are left; never the code.
	ActionRecoveryCodeUsed AdminAction = "account.recovery_code_used"
	// ActionRecoveryCodesRenewed is a person's recovery codes replaced by
	// new ones (never the codes).
	ActionRecoveryCodesRenewed AdminAction = "account.recovery_codes_renewed"
	// ActionInstanceAdminChanged is instance admin given to or withdrawn
	// from a person (by the operator: `mcpgate user set-admin`).
	ActionInstanceAdminChanged AdminAction = "account.instance_admin_changed"
	// ActionWorkspaceUpdated is a workspace setting changed (the
	// two-factor policy).
	ActionWorkspaceUpdated AdminAction = "workspace.updated"
	// ActionNotificationsUpdated is a workspace's approval notifications
	// changed; ActionNotificationSent a mail or webhook about an approval
	// delivered, ActionNotificationFailed one that was not (or was left
	// out by the mail throttle).
	ActionNotificationsUpdated AdminAction = "notifications.updated"
	ActionNotificationSent     AdminAction = "notification.sent"
	ActionNotificationFailed   AdminAction = "notification.failed"
	// The upstream server actions: a server added, changed (URL,
	// credential headers by name, aliases, enabled) or removed; a
	// discovery and what it found changed; one that failed; a tool's
	// changed definition quarantined, and approved by an admin; a tool
	// turned on or off or its approval mode set. A credential's value is
	// never among their arguments, only header names.
	ActionServerAdded           AdminAction = "server.added"
	ActionServerUpdated         AdminAction = "server.updated"
	ActionServerRemoved         AdminAction = "server.removed"
	ActionServerDiscovered      AdminAction = "server.discovered"
	ActionServerDiscoveryFailed AdminAction = "server.discovery_failed"
	ActionServerToolQuarantined AdminAction = "server.tool_quarantined"
	ActionServerToolApproved    AdminAction = "server.tool_approved"
	ActionServerToolUpdated     AdminAction = "server.tool_updated"
	// ActionServerClientRequest is a request of an upstream server to the
	// caller's client during a tool call (sampling, elicitation, roots),
	// relayed or refused: the method, the elicitation's message and mode,
	// a URL's host and the action the client answered; never a sampling
	// prompt nor any value of an answer.
	ActionServerClientRequest AdminAction = "server.client_request"
)

// AdminActions lists every admin action, in the order a filter shows them.
var AdminActions = []AdminAction{
	ActionCredentialStored, ActionCredentialReplaced, ActionCredentialRejected, ActionCredentialRemoved,
	ActionKeyCreated, ActionKeyRevoked, ActionToolEnabled, ActionToolDisabled, ActionToolUpdated,
	ActionMemberRoleChanged, ActionMemberRemoved, ActionInvitationCreated, ActionInvitationDeleted, ActionInvitationAccepted,
	ActionApprovalRequested, ActionApprovalApproved, ActionApprovalDenied, ActionApprovalExpired, ActionApprovalUsed,
	ActionGuardrailsUpdated, ActionGuardrailRefused,
	ActionPasswordChanged, ActionGrantCreated, ActionGrantRevoked,
	ActionPasswordReset, ActionKeysRevokedAll, ActionMailSent, ActionEmailVerified, ActionSessionsEnded, ActionEmailChanged, ActionAccountDeleted,
	ActionTOTPEnrolmentStarted, ActionTOTPEnabled, ActionTOTPDisabled, ActionRecoveryCodeUsed, ActionRecoveryCodesRenewed, ActionInstanceAdminChanged, ActionWorkspaceUpdated,
	ActionNotificationsUpdated, ActionNotificationSent, ActionNotificationFailed,
	ActionServerAdded, ActionServerUpdated, ActionServerRemoved, ActionServerDiscovered, ActionServerDiscoveryFailed,
	ActionServerToolQuarantined, ActionServerToolApproved, ActionServerToolUpdated,
	ActionServerConnected, ActionServerDisconnected, ActionServerRefreshFailed, ActionServerIssuerChanged, ActionServerClientRequest,
	ActionAuditExported,
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
	GrantID        string         `json:"grant_id,omitempty"`
	ClientName     string         `json:"client_name,omitempty"`
	Kind           AuditKind      `json:"kind"`
	Action         string         `json:"action"`
	Arguments      map[string]any `json:"arguments,omitempty"`
	Outcome        Outcome        `json:"outcome"`
	Message        string         `json:"message,omitempty"`
	UpstreamStatus int            `json:"upstream_status,omitempty"`
	DurationMS     float64        `json:"duration_ms"`
	Source         Source         `json:"source,omitempty"`
	CreatedAt      time.Time      `json:"created_at"`
	// EventID is given once, when the event is recorded; the store keeps
	// one row per EventID, so a batch written twice (a replayed spool, a
	// retry after a lost commit) is stored once. Never read back.
	EventID string `json:"event_id,omitempty"`
}

// NewAdminEvent is the one way an admin action becomes an audit event: by
// the actor, in the actor's workspace, with its arguments redacted like a
// tool call's.
func NewAdminEvent(a *Actor, action AdminAction, args map[string]any) AuditEvent {
	return AuditEvent{WorkspaceID: a.WorkspaceID, ActorID: a.UserID, KeyID: a.KeyID, GrantID: a.GrantID,
		ClientName: a.ClientName, Kind: KindAdmin, Action: cutString(string(action), maxNameBytes), Arguments: RedactArguments(args),
		Outcome: OutcomeOK, Source: a.Source}
}

// NewToolEvent returns the audit event of a call of tool by the actor, with
// its arguments redacted; the caller fills in the outcome.
// A tool name is the client's to choose (an unknown tool is refused, and
// audited, under the name it was called by), so it is cut like any name.
func NewToolEvent(a *Actor, tool string, args map[string]any) AuditEvent {
	return AuditEvent{WorkspaceID: a.WorkspaceID, ActorID: a.UserID, KeyID: a.KeyID, GrantID: a.GrantID,
		ClientName: a.ClientName, Kind: KindToolCall, Action: cutString(tool, maxNameBytes), Arguments: RedactArguments(args),
		Outcome: OutcomeOK, Source: a.Source}
}

// AuditFilter narrows an audit listing. Zero values do not filter.
type AuditFilter struct {
	ActorID string // only this user's events
	Action  string // a tool name or admin action
	Kind    AuditKind
	Outcome Outcome
	Source  Source // mcp (AI clients) or dashboard
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

// approvalArg names a human approval; it is not secret (only the bound key
// can use it) but is not part of the call's arguments either.
const approvalArg = "approval_id"

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

// RedactedSecretLooking replaces a value stored under a harmless name that
// looks like a credential all the same (a key pasted into a command, a token
// in a metadata field): the log says a value was there and why it is hidden.
const RedactedSecretLooking = "[redacted: looks like a secret]"

// maxRedactDepth bounds the recursion; anything nested deeper is not kept.
// JSON decoding already bounds depth, but RedactArguments also takes maps
// built in code.
const maxRedactDepth = 32

// What one audit row may hold. A call's arguments are the client's, and a
// refused call is audited too: without these bounds one call wrote a row of
// 480 KB (a name of that length; values were already cut).
const (
	// maxValueBytes cuts a string value.
	maxValueBytes = 256
	// maxNameBytes cuts a name: an argument's, a nested key, a tool's.
	maxNameBytes = 128
	// MaxArgumentsBytes caps a row's arguments as JSON; past it, whole
	// arguments are left out (the largest first) and ArgumentsCut says
	// how many and how big they were.
	MaxArgumentsBytes = 16 << 10
)

// ArgumentsCut is the name of the marker a row's arguments get when some
// were left out to keep the row within MaxArgumentsBytes.
const ArgumentsCut = "[arguments cut]"

// RedactArguments returns a copy of a call's arguments safe for the audit
// log, at every depth of nested objects and arrays: the value under a
// sensitive name is replaced (names are kept, also inside a sensitive
// object, so the log still says which were given), any string that looks
// like a credential is replaced whatever its name, a password in a URL
// (postgres://u:pw@h/db) is replaced, long strings and names are cut, and
// the whole stays within MaxArgumentsBytes.
func RedactArguments(args map[string]any) map[string]any {
	if len(args) == 0 {
		return nil
	}
	out := make(map[string]any, len(args))
	for k, v := range args {
		if k == confirmationArg || k == approvalArg {
			continue
		}
		out[safeName(k)] = redactValue(k, v, 1)
	}
	return capArguments(out)
}

// capArguments keeps out within MaxArgumentsBytes: it leaves out the
// largest arguments until the rest fits beside a marker saying what was
// left out.
func capArguments(out map[string]any) map[string]any {
	sizes := make(map[string]int, len(out))
	total := 2
	for k, v := range out {
		b, _ := json.Marshal(map[string]any{k: v})
		sizes[k] = len(b) - 1 // the entry and its comma, without the braces
		total += sizes[k]
	}
	if total <= MaxArgumentsBytes {
		return out
	}
	names := make([]string, 0, len(out))
	for k := range out {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		return sizes[names[i]] > sizes[names[j]] || sizes[names[i]] == sizes[names[j]] && names[i] < names[j]
	})
	cut, cutBytes := 0, 0
	for _, k := range names {
		if total <= MaxArgumentsBytes-256 { // room for the marker
			break
		}
		delete(out, k)
		total -= sizes[k]
		cut++
		cutBytes += sizes[k]
	}
	out[ArgumentsCut] = fmt.Sprintf("%d of %d arguments left out (%d bytes): an audit row keeps at most %d bytes of arguments",
		cut, len(names), cutBytes, MaxArgumentsBytes)
	return out
}

// safeName returns an argument's name for the log: names are kept unless
// the name itself looks like a credential (a key used as a map key), and
// cut like values.
func safeName(k string) string {
	if LooksSecret(k) {
		return RedactedSecretLooking
	}
	return cutString(k, maxNameBytes)
}

// cutString cuts s to at most n bytes, at a character boundary, marking the
// cut with "…".
func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// urlPassword finds the password of a URL's userinfo (scheme://user:pw@),
// anywhere in a string (a connection string inside a command); the match
// runs to the last @ before the path, as a URL parser reads it.
var urlPassword = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.\-]*://[^\s/?#:@]*):[^\s/?#]*@`)

// redactURLPasswords replaces the passwords of URLs in s.
func redactURLPasswords(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlPassword.ReplaceAllString(s, "${1}:"+Redacted+"@")
}

// redactValue redacts v, found under name (empty inside arrays).
func redactValue(name string, v any, depth int) any {
	if depth > maxRedactDepth {
		return Redacted
	}
	if name != "" && sensitiveArgName(name) {
		return redactAll(v, depth)
	}
	switch v := v.(type) {
	case map[string]any:
		r := make(map[string]any, len(v))
		for k, e := range v {
			r[safeName(k)] = redactValue(k, e, depth+1)
		}
		return r
	case []any:
		r := make([]any, len(v))
		for i, e := range v {
			r[i] = redactValue("", e, depth+1)
		}
		return r
	case string:
		if LooksSecret(v) {
			return RedactedSecretLooking
		}
		return cutString(redactURLPasswords(v), maxValueBytes)
	}
	return v
}

// redactAll replaces every value under a sensitive name, keeping the names
// of an object (env_vars: {"DB_URL": "[redacted]"}) and the length of an
// array.
func redactAll(v any, depth int) any {
	if depth > maxRedactDepth {
		return Redacted
	}
	switch v := v.(type) {
	case map[string]any:
		r := make(map[string]any, len(v))
		for k, e := range v {
			r[safeName(k)] = redactAll(e, depth+1)
		}
		return r
	case []any:
		r := make([]any, len(v))
		for i, e := range v {
			r[i] = redactAll(e, depth+1)
		}
		return r
	case nil:
		return nil
	}
	return Redacted
}

// secretPrefixes start credentials of well-known services: E2B, this
// gateway's keys and invitations, OpenAI/Anthropic/Stripe style keys,
// GitHub, Slack, AWS, GitLab, Google.
var secretPrefixes = []string{"e2b_", "mcpg_", "inv_", "sk_", "sk-", "rk_", "pk_live_", "ghp_", "gho_", "ghu_", "ghs_",
	"ghr_", "github_pat_", "xoxb-", "xoxp-", "xoxa-", "xapp-", "akia", "asia", "glpat-", "aiza", "ya29.", "bearer "}

// LooksSecret reports whether s looks like a credential whatever it is
// called: a known key prefix followed by enough key material, a JWT, or a
// long run of random-looking characters. It errs on the side of hiding: an
// audit entry that hides a harmless value costs less than one that keeps a
// key. UUIDs, paths and sentences are not flagged.
func LooksSecret(s string) bool {
	if len(s) < 16 {
		return false
	}
	l := strings.ToLower(s)
	for _, p := range secretPrefixes {
		if i := strings.Index(l, p); i >= 0 && (i == 0 || !isTokenChar(l[i-1])) && keyMaterial(s[i+len(p):]) {
			return true
		}
	}
	for _, tok := range strings.FieldsFunc(s, func(r rune) bool { return r > 127 || !isTokenChar(byte(r)) && r != '.' }) {
		if looksJWT(tok) || looksRandom(tok) {
			return true
		}
	}
	return false
}

// isTokenChar reports whether c may appear in a key or token.
func isTokenChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '+' || c == '='
}

// keyMaterial reports whether s starts with what follows a key prefix: at
// least 12 token characters with a digit among them. Names built from words
// (the tool e2b_kill_sandbox, a task sk-learn-pipeline) have none.
func keyMaterial(s string) bool {
	n, digit := 0, false
	for n < len(s) && isTokenChar(s[n]) {
		digit = digit || s[n] >= '0' && s[n] <= '9'
		n++
	}
	return n >= 12 && digit
}

// looksJWT reports a JWS compact shape: three base64url parts, the first a
// JSON object ("eyJ").
func looksJWT(tok string) bool {
	parts := strings.Split(tok, ".")
	return len(parts) == 3 && strings.HasPrefix(parts[0], "eyJ") && len(parts[1]) >= 4 && len(parts[2]) >= 16
}

// looksRandom reports a long token of mixed letters and digits with high
// entropy: at least 32 characters, not a UUID, and more than 3.5 bits per
// character (a hex digest has at most 4, English words about 2.5 to 3).
func looksRandom(tok string) bool {
	tok = strings.Trim(tok, ".")
	if len(tok) < 32 || strings.Contains(tok, ".") || looksUUID(tok) {
		return false
	}
	var lower, upper, digit bool
	var counts [256]int
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		counts[c]++
		switch {
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= '0' && c <= '9':
			digit = true
		}
	}
	if !digit || !(lower || upper) {
		return false
	}
	var h float64
	n := float64(len(tok))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h > 3.5
}

// looksUUID reports the 8-4-4-4-12 hex form, which names rows, not secrets.
func looksUUID(tok string) bool {
	if len(tok) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := tok[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
		} else if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
