package api

import (
	"encoding/base64"
	"net/http"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

// Two-factor sign-in: the only answers that ever carry the TOTP secret
// (enrolment) and the recovery codes (confirmation), each once.

type totpBegin struct {
	CurrentPassword string `json:"current_password"`
}

// totpEnrollment is POST /me/totp's answer. QRPNG is a data: URL, which the
// dashboard's CSP allows for images (img-src 'self' data:), so the page
// shows it without any other request.
type totpEnrollment struct {
	Secret     string `json:"secret"`
	OTPAuthURL string `json:"otpauth_url"`
	QRPNG      string `json:"qr_png"`
	Issuer     string `json:"issuer"`
	Account    string `json:"account"`
}

// handleTOTPBegin is POST /me/totp {"current_password"}: a new pending
// enrolment, replacing a pending one.
func (s *Server) handleTOTPBegin(r *http.Request, req totpBegin) (reply, error) {
	en, err := s.svc.TwoFactor.BeginTOTP(r.Context(), mcpgate.UserFromContext(r.Context()), req.CurrentPassword, httpx.ClientAddress(r))
	if err != nil {
		return reply{}, err
	}
	return created(totpEnrollment{Secret: en.Secret.Reveal(), OTPAuthURL: en.URL.Reveal(),
		QRPNG:  "data:image/png;base64," + base64.StdEncoding.EncodeToString(en.QRCodePNG),
		Issuer: en.Issuer, Account: en.Account}), nil
}

type totpCode struct {
	Code string `json:"code"`
}

// handleTOTPConfirm is POST /me/totp/confirm {"code"}: two-factor sign-in
// on, and the recovery codes, shown this once.
func (s *Server) handleTOTPConfirm(r *http.Request, req totpCode) (reply, error) {
	codes, err := s.svc.TwoFactor.ConfirmTOTP(r.Context(), mcpgate.UserFromContext(r.Context()), req.Code)
	return ok(listOf("recovery_codes", codes)), err
}

// factorsCheck is what a change to the second factor itself asks for: the
// password and a current code (or an unused recovery code).
type factorsCheck struct {
	Code            string `json:"code"`
	CurrentPassword string `json:"current_password"`
}

// handleRecoveryCodesRenew is POST /me/totp/recovery-codes
// {"code","current_password"}: new recovery codes, shown this once; the old
// ones stop working.
func (s *Server) handleRecoveryCodesRenew(r *http.Request, req factorsCheck) (reply, error) {
	codes, err := s.svc.TwoFactor.NewRecoveryCodes(r.Context(), mcpgate.UserFromContext(r.Context()), req.Code, req.CurrentPassword,
		httpx.ClientAddress(r))
	return ok(listOf("recovery_codes", codes)), err
}

// handleTOTPDisable is DELETE /me/totp {"code","current_password"}: the
// code is a current TOTP code or an unused recovery code.
func (s *Server) handleTOTPDisable(r *http.Request, req factorsCheck) (reply, error) {
	return noContent, s.svc.TwoFactor.DisableTOTP(r.Context(), mcpgate.UserFromContext(r.Context()), req.Code, req.CurrentPassword,
		httpx.ClientAddress(r))
}
