package service

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/store"
)

// maxPendingApprovals bounds the open requests of one user in a workspace,
// so that a looping client cannot flood the people who decide.
const maxPendingApprovals = 50

// argsHash binds an approval to a call's exact arguments (defaults
// applied) and to the tool whose policy the call followed when it was
// asked for (follows; "" for none), so that an approval given for a call
// that ended nothing is not spent on the same call once it would end
// something (see useApproval). json.Marshal sorts map keys, so equal
// arguments hash equally. It is an HMAC under a key from the
// configuration, not a bare hash: the arguments may hold secrets
// (env_vars), and a database dump must not let anyone test guesses of
// them against the stored value.
func (s *Approvals) argsHash(args map[string]any, follows string) string {
	b, _ := json.Marshal(args)
	m := hmac.New(sha256.New, s.argsKey)
	m.Write(b)
	if follows != "" {
		// JSON never holds a NUL: no arguments hash like these.
		m.Write([]byte("\x00follows\x00" + follows))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// usableHashes are the bindings an approval may have to be spent on a call
// that follows follows now: the same, or, for a call that follows nothing
// now, one that followed the tool's own Follows (an approval of the
// stricter effect covers the milder: a shortening approved becomes an
// extension as time passes).
func (s *Approvals) usableHashes(t *connectors.Tool, args map[string]any, follows string) []string {
	hashes := []string{s.argsHash(args, follows)}
	if follows == "" && t.Follows != "" {
		hashes = append(hashes, s.argsHash(args, t.Follows))
	}
	return hashes
}

func (s *Approvals) approvalURL(ap *mcpgate.ApprovalRequest) string {
	return s.opts.PublicURL + mcpgate.ApprovalPath(ap.WorkspaceID, ap.ID)
}

// present fills in what the stored row does not say: the page's URL and the
// state as of now.
func (s *Approvals) present(ap *mcpgate.ApprovalRequest) *mcpgate.ApprovalRequest {
	ap.URL = s.approvalURL(ap)
	ap.State = ap.EffectiveState(s.now())
	if ap.Arguments == nil {
		ap.Arguments = map[string]any{}
	}
	return ap
}

func approvalEvent(a *mcpgate.Actor, action mcpgate.AdminAction, ap *mcpgate.ApprovalRequest) mcpgate.AuditEvent {
	// "approval", not approval_id: RedactArguments drops the gateway's own
	// approval_id argument from tool calls.
	return mcpgate.NewAdminEvent(a, action, map[string]any{"approval": ap.ID, "tool": ap.Tool,
		"requested_by": ap.RequestedBy, "arguments": ap.Arguments})
}

// requestApproval stores a pending approval for a call that the policy says
// a person must approve, and audits the request. Nothing runs.
func (s *Approvals) requestApproval(ctx context.Context, a *mcpgate.Actor, t *connectors.Tool, args map[string]any, follows, reason string) (*mcpgate.ApprovalRequest, error) {
	if a.CredentialID() == "" {
		// An approval is bound to the credential that asked for it (an MCP
		// key or an OAuth grant); anything else is refused rather than
		// bound loosely (to the user alone).
		err := mcpgate.Errorf(mcpgate.EForbidden, "%s needs a person's approval in the dashboard, which this kind of credential "+
			"cannot ask for. Use an MCP key or a connected app, or run it from the dashboard.", t.Name)
		s.tools.deny(ctx, a, t, args, err)
		return nil, err
	}
	now := s.now()
	// Counted here to refuse early, before the upstream is read for the
	// summary; counted again, with the insert, under a lock below, which is
	// what holds against parallel requests.
	n, err := s.db.CountPendingApprovals(ctx, a.WorkspaceID, a.UserID, now)
	if err != nil {
		return nil, mcpgate.WrapError(mcpgate.EUnavailable, err, "the gateway cannot store approval requests right now; try again shortly")
	}
	if n >= maxPendingApprovals {
		return nil, s.tooManyPending(a, n)
	}
	summary, err := s.summarize(ctx, a, t, args)
	if err != nil {
		s.tools.auditCall(ctx, a, t, args, connectors.UpstreamStatus(err), now, err)
		return nil, err
	}
	ap := &mcpgate.ApprovalRequest{WorkspaceID: a.WorkspaceID, KeyID: a.KeyID, GrantID: a.GrantID, ClientName: a.ClientName, RequestedBy: a.UserID, RequesterEmail: a.Email,
		Tool: t.Name, ToolTitle: t.Title, Arguments: mcpgate.RedactArguments(args), Summary: withReason(summary, reason),
		ExpiresAt: now.Add(mcpgate.ApprovalTTL).Truncate(time.Second)}
	if ap.Arguments == nil {
		ap.Arguments = map[string]any{}
	}
	n, err = s.db.CreateApprovalWithin(ctx, ap, s.argsHash(args, follows), maxPendingApprovals, now)
	if errors.Is(err, store.ErrCapReached) {
		return nil, s.tooManyPending(a, n)
	}
	if err != nil {
		return nil, mcpgate.WrapError(mcpgate.EUnavailable, err, "the gateway cannot store approval requests right now; try again shortly")
	}
	s.present(ap)
	s.record(ctx, approvalEvent(a, mcpgate.ActionApprovalRequested, ap))
	s.notifications.notifyApproval(ctx, mcpgate.EventApprovalRequested, ap)
	return ap, nil
}

// tooManyPending refuses an approval request past maxPendingApprovals.
func (s *Approvals) tooManyPending(a *mcpgate.Actor, n int) error {
	return mcpgate.Errorf(mcpgate.ETooMany, "%d approval requests of yours are already waiting in this workspace; ask the "+
		"user to decide those (%s/app/w/%s/approvals) before asking for more", n, s.opts.PublicURL, a.WorkspaceID)
}

// summarize says what a call would do: in the connector's words, from the
// upstream's current state, when it can; otherwise the generic summary. A
// call on something that does not exist is refused here rather than sent to
// a person.
func (s *Approvals) summarize(ctx context.Context, a *mcpgate.Actor, t *connectors.Tool, args map[string]any) (string, error) {
	generic := describe(t, args)
	c, _ := s.opts.Registry.ConnectorOf(t.Name)
	d, ok := c.(connectors.Describer)
	if !ok {
		return generic, nil
	}
	cred, err := s.tools.credential(ctx, a, c)
	if err != nil {
		return "", err
	}
	callCtx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	out, err := d.Describe(callCtx, cred, t.Name, args)
	switch {
	case mcpgate.ErrorCode(err) == mcpgate.ENotFound:
		return "", err
	case err != nil:
		return generic + " (The gateway could not read its current state: " + mcpgate.ErrorMessage(err) + ")", nil
	case out == "":
		return generic, nil
	}
	return out, nil
}

// useApproval spends the approval named by a call, which must be for
// exactly this call, weighed as it is now: follows (and reason) are what the
// call's guard found under the call's locks. A refusal says which check
// failed: the caller already holds the id, and each case needs a different
// next step.
func (s *Approvals) useApproval(ctx context.Context, a *mcpgate.Actor, t *connectors.Tool, args map[string]any, follows, reason, id string) error {
	hashes := s.usableHashes(t, args, follows)
	ok, err := s.db.UseApproval(ctx, store.ApprovalUse{WorkspaceID: a.WorkspaceID, ID: id, KeyID: a.KeyID, GrantID: a.GrantID, UserID: a.UserID,
		Tool: t.Name, ArgsHashes: hashes, Now: s.now()})
	if err != nil {
		return mcpgate.WrapError(mcpgate.EUnavailable, err, "the gateway cannot check approvals right now; try again shortly")
	}
	if ok {
		ap, _, err := s.db.FindApproval(ctx, a.WorkspaceID, id)
		if err == nil {
			s.record(ctx, approvalEvent(a, mcpgate.ActionApprovalUsed, ap))
		}
		return nil
	}
	err = s.approvalRefusal(ctx, a, t, id, args, follows, reason)
	s.tools.deny(ctx, a, t, args, err)
	return err
}

// continueApproval lets a retry that answers an upstream tool's input
// requests run under the approval its first call used up (see
// mcpgate.ToolCall.ContinuesApproval): the approval must be one this
// caller was given for this tool and these arguments, and used.
func (s *Approvals) continueApproval(ctx context.Context, a *mcpgate.Actor, t *connectors.Tool, args map[string]any, follows, id string) error {
	ap, stored, err := s.db.FindApproval(ctx, a.WorkspaceID, id)
	if err != nil && mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		return mcpgate.WrapError(mcpgate.EUnavailable, err, "the gateway cannot check approvals right now; try again shortly")
	}
	if err != nil || ap.KeyID != a.KeyID || ap.GrantID != a.GrantID || ap.RequestedBy != a.UserID || ap.Tool != t.Name ||
		!slices.Contains(s.usableHashes(t, args, follows), stored) || ap.EffectiveState(s.now()) != mcpgate.ApprovalUsed {
		err := mcpgate.Errorf(mcpgate.EForbidden, "Not done: the approval this retry continues does not cover it. "+
			"Call %s again without requestState to ask for a new approval.", t.Name)
		s.tools.deny(ctx, a, t, args, err)
		return err
	}
	return nil
}

func (s *Approvals) approvalRefusal(ctx context.Context, a *mcpgate.Actor, t *connectors.Tool, id string, args map[string]any, follows, reason string) error {
	again := "Call " + t.Name + " again without approval_id to ask for a new approval."
	ap, stored, err := s.db.FindApproval(ctx, a.WorkspaceID, id)
	if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
		if len(id) > 64 { // it is the caller's text: do not echo a megabyte of it
			id = id[:64] + "…"
		}
		return mcpgate.Errorf(mcpgate.ENotFound, "There is no approval %q in this workspace. %s", id, again)
	}
	if err != nil {
		return mcpgate.WrapError(mcpgate.EUnavailable, err, "the gateway cannot check approvals right now; try again shortly")
	}
	if ap.KeyID != a.KeyID || ap.GrantID != a.GrantID || ap.RequestedBy != a.UserID || ap.Tool != t.Name {
		return differentCall(ap, again)
	}
	if !slices.Contains(s.usableHashes(t, args, follows), stored) {
		if follows != "" && stored == s.argsHash(args, "") {
			return mcpgate.Errorf(mcpgate.EForbidden, "Not done: this call changed meaning since it was approved. %s That is what %s "+
				"does, and the person approved the call when it did not. %s", strings.TrimSpace(reason), follows, again)
		}
		return differentCall(ap, again)
	}
	switch ap.EffectiveState(s.now()) {
	case mcpgate.ApprovalPending:
		return mcpgate.Errorf(mcpgate.EConflict, "Not done: nobody has approved this yet. Ask the user to open %s and approve it, "+
			"then call %s again with the same arguments and approval_id.", s.approvalURL(ap), t.Name)
	case mcpgate.ApprovalDenied:
		who := "A person"
		if ap.DecidedByEmail != "" {
			who = ap.DecidedByEmail
		}
		return mcpgate.Errorf(mcpgate.EForbidden, "Not done: %s denied this call in the dashboard. Do not try again unless the user asks.", who)
	case mcpgate.ApprovalExpired:
		s.expire(ctx, a, ap)
		return mcpgate.Errorf(mcpgate.EForbidden, "Not done: this approval expired (approvals last %d minutes from the request). %s",
			int(mcpgate.ApprovalTTL/time.Minute), again)
	case mcpgate.ApprovalUsed:
		return mcpgate.Errorf(mcpgate.EForbidden, "Not done: this approval was already used; each approval allows one call. %s", again)
	}
	return mcpgate.Errorf(mcpgate.EConflict, "Not done: the approval changed while it was checked; try again.")
}

// differentCall refuses an approval spent on a call it was not given for.
func differentCall(ap *mcpgate.ApprovalRequest, again string) error {
	return mcpgate.Errorf(mcpgate.EForbidden, "This approval is for a different call: it allows only %s with exactly the arguments "+
		"the person approved, from the MCP key or connected app that asked for it. Nothing was done. Call again with exactly those arguments, or %s",
		ap.Tool, lowerFirst(again))
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]|0x20) + s[1:]
}

// expire marks an expired request so and audits that, once.
func (s *Approvals) expire(ctx context.Context, a *mcpgate.Actor, ap *mcpgate.ApprovalRequest) {
	if ok, err := s.db.ExpireApproval(ctx, ap.WorkspaceID, ap.ID, s.now()); err == nil && ok {
		s.record(ctx, approvalEvent(a, mcpgate.ActionApprovalExpired, ap))
		expired := *ap
		expired.State = mcpgate.ApprovalExpired
		s.notifications.notifyApproval(ctx, mcpgate.EventApprovalExpired, &expired)
	}
}

// Approvals implements mcpgate.ApprovalService.
func (s *Approvals) Approvals(ctx context.Context, a *mcpgate.Actor, state mcpgate.ApprovalState) ([]mcpgate.ApprovalRequest, error) {
	if state != "" && !state.Valid() {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "state must be pending, approved, denied, expired or used")
	}
	f := store.ApprovalFilter{State: state, Now: s.now(), UserID: visibleOwner(a)}
	list, err := s.db.FindApprovals(ctx, a.WorkspaceID, f)
	if err != nil {
		return nil, err
	}
	for i := range list {
		s.present(&list[i])
	}
	return list, nil
}

var errNotYours = mcpgate.Errorf(mcpgate.EForbidden,
	"only the person whose MCP key asked for this, or a workspace owner or admin, can see or decide it")

// Approval implements mcpgate.ApprovalService.
func (s *Approvals) Approval(ctx context.Context, a *mcpgate.Actor, id string) (*mcpgate.ApprovalRequest, error) {
	ap, _, err := s.db.FindApproval(ctx, a.WorkspaceID, id)
	if err != nil {
		return nil, err
	}
	if !mayManage(a, ap.RequestedBy) {
		return nil, errNotYours
	}
	return s.present(ap), nil
}

// Approve implements mcpgate.ApprovalService.
func (s *Approvals) Approve(ctx context.Context, a *mcpgate.Actor, id string) (*mcpgate.ApprovalRequest, error) {
	return s.decide(ctx, a, id, true)
}

// Deny implements mcpgate.ApprovalService.
func (s *Approvals) Deny(ctx context.Context, a *mcpgate.Actor, id string) (*mcpgate.ApprovalRequest, error) {
	return s.decide(ctx, a, id, false)
}

func (s *Approvals) decide(ctx context.Context, a *mcpgate.Actor, id string, approve bool) (*mcpgate.ApprovalRequest, error) {
	if !a.IsPerson() {
		// The whole point: the credential that asked can never answer.
		return nil, mcpgate.Errorf(mcpgate.EForbidden, "only a person signed in to the dashboard can approve or deny a call")
	}
	ap, err := s.Approval(ctx, a, id)
	if err != nil {
		return nil, err
	}
	if err := s.requireDecider(ctx, a, ap.RequestedBy); err != nil {
		return nil, err
	}
	switch ap.State {
	case mcpgate.ApprovalExpired:
		s.expire(ctx, a, ap)
		return nil, mcpgate.Errorf(mcpgate.EConflict, "this request expired (requests last %d minutes); the AI client must ask again",
			int(mcpgate.ApprovalTTL/time.Minute))
	case mcpgate.ApprovalPending:
	default:
		return nil, mcpgate.Errorf(mcpgate.EConflict, "this request was already %s", ap.State)
	}
	ok, err := s.db.DecideApproval(ctx, a.WorkspaceID, id, a.UserID, approve, s.now())
	if err != nil {
		return nil, err
	}
	after, err := s.Approval(ctx, a, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		// Someone else decided first, or it expired just now.
		return nil, mcpgate.Errorf(mcpgate.EConflict, "this request was already %s", after.State)
	}
	action := mcpgate.ActionApprovalDenied
	if approve {
		action = mcpgate.ActionApprovalApproved
	}
	s.record(ctx, approvalEvent(a, action, after))
	// The calls waiting here hear it at once; those on other replicas
	// through the decision's notification.
	s.waits.wake(a.WorkspaceID, id)
	s.notifications.notifyApproval(ctx, string(action), after)
	return after, nil
}

// requireDecider holds a person who decides for the human in the loop
// (approves or denies a request, or confirms in the dashboard a call that
// needs a person's approval) to the workspace's rules, read fresh on every
// decision:
//   - while the workspace requires two-factor sign-in, the decider must
//     have it on, whatever their role: the policy is about the decision,
//     not the title, so an admin who demotes themselves (or is demoted) to
//     member cannot go on approving their own key's requests without it;
//   - with four eyes on, the decider is not requestedBy, the person whose
//     key or app asked (in the dashboard: the person making the call).
func (s *Approvals) requireDecider(ctx context.Context, a *mcpgate.Actor, requestedBy string) error {
	twoFactor, fourEyes, enrolled, err := s.db.DecisionPolicy(ctx, a.WorkspaceID, a.UserID)
	if err != nil {
		return err
	}
	if twoFactor && !enrolled {
		return mcpgate.Errorf(mcpgate.ETOTPEnrolment, "this workspace requires two-factor sign-in of everyone who approves, "+
			"denies or confirms calls for a person: turn it on in Account settings (%s/app/account)", s.opts.PublicURL)
	}
	if fourEyes && requestedBy == a.UserID {
		return mcpgate.Errorf(mcpgate.EForbidden, "this workspace requires four eyes: someone other than the person who asked "+
			"must approve or deny a call that needs a person's approval. Ask another owner or admin to decide it "+
			"(%s/app/w/%s/approvals); from the dashboard, run such a call from an AI client with your MCP key, so that they can approve it",
			s.opts.PublicURL, a.WorkspaceID)
	}
	return nil
}

// confirmInDashboard is the check of a call that needs a person's approval
// and that a person confirmed in the dashboard: they decide for the human
// about their own call, so the decision rules hold (requireDecider). A
// refusal is audited as a denied call.
func (s *Approvals) confirmInDashboard(ctx context.Context, a *mcpgate.Actor, t *connectors.Tool, args map[string]any) error {
	if err := s.requireDecider(ctx, a, a.UserID); err != nil {
		s.tools.deny(ctx, a, t, args, err)
		return err
	}
	return nil
}

// PendingApprovals implements mcpgate.ApprovalService.
func (s *Approvals) PendingApprovals(ctx context.Context, a *mcpgate.Actor) (int, error) {
	return s.db.CountPendingApprovals(ctx, a.WorkspaceID, visibleOwner(a), s.now())
}

// ExpireApprovals marks the requests that expired unattended as such and
// audits each once (the gateway's own action: no actor). The wiring runs it
// periodically; a request touched after its expiry is audited at that
// moment instead (see expire).
func (s *Approvals) ExpireApprovals(ctx context.Context) error {
	expired, err := s.db.ExpireApprovals(ctx, s.now())
	if err != nil {
		return err
	}
	for i := range expired {
		ap := &expired[i]
		s.record(ctx, mcpgate.AuditEvent{WorkspaceID: ap.WorkspaceID, KeyID: ap.KeyID, GrantID: ap.GrantID, Kind: mcpgate.KindAdmin,
			Action: string(mcpgate.ActionApprovalExpired), Outcome: mcpgate.OutcomeOK,
			Arguments: map[string]any{"approval": ap.ID, "tool": ap.Tool, "requested_by": ap.RequestedBy, "arguments": ap.Arguments}})
		if full, _, err := s.db.FindApproval(ctx, ap.WorkspaceID, ap.ID); err == nil {
			s.notifications.notifyApproval(ctx, mcpgate.EventApprovalExpired, full)
		}
	}
	return nil
}
