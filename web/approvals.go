package web

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

// The approval pages: where a person sees what an AI client asked to do and
// approves or denies it. The buttons post to the JSON API (with the CSRF
// header); the approval service decides who may decide.

type approvalsPage struct {
	Admin     bool
	State     string
	States    []mcpgate.ApprovalState
	Approvals []mcpgate.ApprovalRequest
}

func (h *handler) handleApprovals(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	state := r.URL.Query().Get("state")
	if !mcpgate.ApprovalState(state).Valid() {
		state = ""
	}
	p := approvalsPage{Admin: workspaceFrom(ctx).Role.CanAdmin(), State: state,
		States: []mcpgate.ApprovalState{mcpgate.ApprovalPending, mcpgate.ApprovalApproved, mcpgate.ApprovalDenied,
			mcpgate.ApprovalExpired, mcpgate.ApprovalUsed}}
	var err error
	if p.Approvals, err = h.svc.Approvals.Approvals(ctx, actorFrom(ctx), mcpgate.ApprovalState(state)); err != nil {
		h.serverError(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "approvals", h.newView(r, "Approvals", "approvals", p))
}

type approvalPage struct {
	Approval *mcpgate.ApprovalRequest
	// CanDecide: pending, and the viewer may decide it (the service checks
	// again on the write).
	CanDecide bool
	Mine      bool
	Remaining string
	// KeyName is the name of the MCP key that asked, as its owner gave it
	// (empty for an OAuth grant, or a key the viewer cannot list).
	KeyName string
}

func (h *handler) handleApproval(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	a := actorFrom(ctx)
	ap, err := h.svc.Approvals.Approval(ctx, a, chi.URLParam(r, "id"))
	switch mcpgate.ErrorCode(err) {
	case "":
	case mcpgate.ENotFound, mcpgate.EInvalid:
		h.notFound(w, r)
		return
	case mcpgate.EForbidden:
		h.renderError(w, r, http.StatusForbidden, "Not yours to decide",
			"Only the person whose MCP key asked for this, or an owner or admin of this workspace, can see or decide it.")
		return
	default:
		h.serverError(w, r, err)
		return
	}
	p := approvalPage{Approval: ap, Mine: ap.RequestedBy == a.UserID,
		CanDecide: ap.State == mcpgate.ApprovalPending && a.IsPerson()}
	if p.KeyName, err = h.keyName(ctx, a, ap.KeyID); err != nil {
		h.serverError(w, r, err)
		return
	}
	if left := ap.ExpiresAt.Sub(h.opts.Now()); left >= time.Minute {
		p.Remaining = fmt.Sprintf("%d min", int(left.Round(time.Minute)/time.Minute))
	} else if left > 0 {
		p.Remaining = fmt.Sprintf("%d s", int(left.Round(time.Second)/time.Second))
	}
	h.render(w, r, http.StatusOK, "approval", h.newView(r, "Approve "+ap.ToolTitle, "approvals", p))
}

// keyName returns the name of the workspace's MCP key id, as the key list
// the viewer may see has it: the requester sees their own keys, an admin
// every key, the same people the approval page is for. "" when id is empty
// or not in that list.
func (h *handler) keyName(ctx context.Context, a *mcpgate.Actor, id string) (string, error) {
	if id == "" {
		return "", nil
	}
	keys, err := h.svc.Keys.Keys(ctx, a)
	if err != nil {
		return "", err
	}
	for _, k := range keys {
		if k.ID == id {
			return k.Name, nil
		}
	}
	return "", nil
}
