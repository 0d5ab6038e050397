package web

import "net/http"

type forgotPage struct {
	MailEnabled bool
}

type resetPage struct {
	Token string
}

// handleForgot is the "Forgot password?" page. Without SMTP_URL it says
// plainly that the operator must configure email (or reset the password
// with the CLI) rather than offer a form that cannot work.
func (h *handler) handleForgot(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "forgot", h.newView(r, "Reset your password", "",
		forgotPage{MailEnabled: h.svc.Accounts.MailEnabled()}))
}

// handleReset is the page a reset email links to. The token stays in the
// page (and the form) only; the access log records paths without queries.
func (h *handler) handleReset(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	h.render(w, r, http.StatusOK, "reset", h.newView(r, "Choose a new password", "",
		resetPage{Token: r.URL.Query().Get("token")}))
}

type verifyPage struct {
	Token string
}

// handleVerify is the page a verification email links to. It asks for a
// click rather than confirming on load, so that a mail scanner that fetches
// links does not spend the token.
func (h *handler) handleVerify(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	h.render(w, r, http.StatusOK, "verify", h.newView(r, "Confirm your email address", "",
		verifyPage{Token: r.URL.Query().Get("token")}))
}
