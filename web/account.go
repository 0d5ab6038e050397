package web

import (
	"net/http"

	"github.com/mcpgate/mcpgate"
)

type accountPage struct {
	Workspaces []mcpgate.Workspace
	// EmailVerified, MailEnabled and VerifyRequired decide what the email
	// section says: whether an unconfirmed address holds anything back on
	// this gateway, and whether a new confirmation link can be sent.
	EmailVerified  bool
	MailEnabled    bool
	VerifyRequired bool
	// Sessions are the person's live sign-ins, this browser's marked.
	Sessions []mcpgate.Session
	// TOTPEnabled decides whether the two-factor section offers to set it
	// up or to turn it off.
	TOTPEnabled bool
}

// handleAccount is the person's own settings: password and workspaces. It
// is framed in their personal workspace (or their first), so the menus and
// navigation stay where they were.
func (h *handler) handleAccount(w http.ResponseWriter, r *http.Request) {
	u := mcpgate.UserFromContext(r.Context())
	wss, err := h.svc.Workspaces.Workspaces(r.Context(), u)
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	if len(wss) > 0 {
		frame := homeWorkspace(wss)
		r = r.WithContext(mcpgate.NewContextWithWorkspace(r.Context(), &frame, nil))
	}
	verified, err := h.svc.Accounts.EmailVerified(r.Context(), u)
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	sessions, err := h.svc.Accounts.Sessions(r.Context(), u, mcpgate.SessionIDFromContext(r.Context()))
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	totp, err := h.svc.TwoFactor.TOTPEnabled(r.Context(), u)
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "account", h.newView(r, "Account settings", "account",
		accountPage{Workspaces: wss, EmailVerified: verified, MailEnabled: h.svc.Accounts.MailEnabled(),
			VerifyRequired: h.svc.Accounts.EmailVerificationRequired(), Sessions: sessions,
			TOTPEnabled: totp}))
}
