package mcpgate

import (
	"context"
	"strings"
	"time"
)

// Approval is what a workspace demands before a tool's call runs. The
// gateway, not the model, enforces it.
type Approval string

// The approval modes, from weakest to strongest.
const (
	// ApprovalNone runs the call.
	ApprovalNone Approval = "none"
	// ApprovalModel makes the call a two-step one (or, for clients that
	// can show forms, an input request): it proves the client repeated the
	// exact call on purpose, not that a person agreed.
	ApprovalModel Approval = "model"
	// ApprovalHuman runs the call only after a person signed in to the
	// dashboard (the key's owner, or an owner or admin of the workspace)
	// approved exactly this call there.
	ApprovalHuman Approval = "human"
)

// Approvals lists the modes, in the order a setting offers them.
var Approvals = []Approval{ApprovalNone, ApprovalModel, ApprovalHuman}

// Valid reports whether a is a known mode.
func (a Approval) Valid() bool { return a == ApprovalNone || a == ApprovalModel || a == ApprovalHuman }

func (a Approval) rank() int {
	switch a {
	case ApprovalHuman:
		return 2
	case ApprovalModel:
		return 1
	}
	return 0
}

// Stricter returns the stronger of a and b.
func (a Approval) Stricter(b Approval) Approval {
	if b.rank() > a.rank() {
		return b
	}
	if a == "" {
		return ApprovalNone
	}
	return a
}

// ParseApproval checks a mode given by a person or a client.
func ParseApproval(s string) (Approval, error) {
	a := Approval(strings.TrimSpace(s))
	if !a.Valid() {
		return "", Errorf(EInvalid, "approval must be none, model or human")
	}
	return a, nil
}

// ApprovalTTL is how long an approval request stays open: a person must
// approve it, and the client use it, within this time of the request.
const ApprovalTTL = 10 * time.Minute

// ApprovalState is where an approval request stands.
type ApprovalState string

// The approval states. Expired is never stored as such before someone
// touches the request: a pending or approved request past its expiry reads
// as expired.
const (
	ApprovalPending  ApprovalState = "pending"
	ApprovalApproved ApprovalState = "approved"
	ApprovalDenied   ApprovalState = "denied"
	ApprovalExpired  ApprovalState = "expired"
	ApprovalUsed     ApprovalState = "used"
)

// Valid reports whether s is a known state.
func (s ApprovalState) Valid() bool {
	switch s {
	case ApprovalPending, ApprovalApproved, ApprovalDenied, ApprovalExpired, ApprovalUsed:
		return true
	}
	return false
}

// ApprovalRequest is a call that waits for, or got, a person's decision.
// Arguments are stored redacted; the call is bound to the exact arguments
// by a hash that never leaves the store.
type ApprovalRequest struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id"`
	// KeyID is the MCP key that asked, or GrantID the OAuth grant (the
	// connected app, ClientName); only a call with the same credential may
	// use the approval.
	KeyID       string `json:"key_id,omitempty"`
	GrantID     string `json:"grant_id,omitempty"`
	ClientName  string `json:"client_name,omitempty"`
	RequestedBy string `json:"requested_by"`
	// RequesterEmail is the requesting user's address, where it was read.
	RequesterEmail string         `json:"requested_by_email,omitempty"`
	Tool           string         `json:"tool"`
	ToolTitle      string         `json:"tool_title"`
	Arguments      map[string]any `json:"arguments"`
	// Summary says in plain words what the call would do.
	Summary   string        `json:"summary"`
	State     ApprovalState `json:"state"`
	CreatedAt time.Time     `json:"created_at"`
	ExpiresAt time.Time     `json:"expires_at"`
	// DecidedBy is the person who approved or denied it.
	DecidedBy      string     `json:"decided_by,omitempty"`
	DecidedByEmail string     `json:"decided_by_email,omitempty"`
	DecidedAt      *time.Time `json:"decided_at,omitempty"`
	UsedAt         *time.Time `json:"used_at,omitempty"`
	// URL is the dashboard page where a person decides.
	URL string `json:"url"`
}

// EffectiveState returns the state at now: a pending or approved request
// past its expiry is expired.
func (r *ApprovalRequest) EffectiveState(now time.Time) ApprovalState {
	if (r.State == ApprovalPending || r.State == ApprovalApproved) && !now.Before(r.ExpiresAt) {
		return ApprovalExpired
	}
	return r.State
}

// ApprovalPath returns the dashboard path of an approval request.
func ApprovalPath(workspaceID, id string) string { return "/app/w/" + workspaceID + "/approvals/" + id }

// ApprovalService lets people see and decide approval requests. Only a
// signed-in person (never an MCP key or OAuth token) decides, and only the
// requesting user or an owner or admin of the workspace.
type ApprovalService interface {
	// Approvals lists requests, newest first: every one for an admin, the
	// person's own for a member. An empty state lists all.
	Approvals(ctx context.Context, a *Actor, state ApprovalState) ([]ApprovalRequest, error)
	// Approval returns one request. Another workspace's is ENotFound.
	Approval(ctx context.Context, a *Actor, id string) (*ApprovalRequest, error)
	// Approve approves a pending request.
	Approve(ctx context.Context, a *Actor, id string) (*ApprovalRequest, error)
	// Deny denies a pending request.
	Deny(ctx context.Context, a *Actor, id string) (*ApprovalRequest, error)
	// PendingApprovals counts the requests waiting for the actor to decide.
	PendingApprovals(ctx context.Context, a *Actor) (int, error)
}

// ApprovalRequiredError is CallTool's answer for a call whose policy is
// human and that came without an approval: nothing ran, and the request now
// waits for a person in the dashboard.
type ApprovalRequiredError struct {
	Tool     ToolInfo
	Approval *ApprovalRequest
}

// Error implements error.
func (e *ApprovalRequiredError) Error() string { return "this action needs a person's approval" }

// Unwrap gives the error its code: a conflict until approved.
func (e *ApprovalRequiredError) Unwrap() error {
	return Errorf(EConflict, "this action needs a person's approval in the dashboard: %s", e.Approval.URL)
}

// IsPerson reports whether the actor is a person signed in to the
// dashboard or the API, as opposed to an AI client holding an MCP key or an
// OAuth token. Only WorkspaceService.Enter sets a role, and never with a
// key, so all three conditions hold only for a session.
func (a *Actor) IsPerson() bool {
	return a != nil && a.Source != SourceMCP && a.CredentialID() == "" && a.Role.Valid()
}

// MaxApprovalWaitSeconds bounds Workspace.ApprovalWaitSeconds: a call held
// open longer than about a minute meets the idle timeouts of the proxies
// and clients between the agent and the gateway, which would cut it with no
// answer at all, where the link answer still reaches the agent.
const MaxApprovalWaitSeconds = 55

// ApprovalWaiter holds a call that needs a person's approval open until a
// person decides, for as long as the workspace's ApprovalWaitSeconds allows.
type ApprovalWaiter interface {
	// AwaitApproval waits for a decision on ap, the request the actor's
	// call has just opened, without holding a database connection: it
	// learns of the decision from whichever replica it is made on. It
	// returns the request's state when the wait ended: approved or denied
	// (or expired or used) when it was decided; pending when the workspace
	// sets no wait, nobody decided in time, or ctx ended. The request
	// stays as it is in every case; the caller spends it (or not) with the
	// call's ApprovalID. An error means no wait happened (too many calls
	// already wait, or the request could not be read) and says why in
	// words for the caller.
	//
	// progress, when set, is called as the wait begins and every few
	// seconds after, with the time waited and the whole wait; an error
	// from it (the client went away) ends the wait as pending.
	AwaitApproval(ctx context.Context, a *Actor, ap *ApprovalRequest, progress func(waited, wait time.Duration) error) (ApprovalState, error)
}
