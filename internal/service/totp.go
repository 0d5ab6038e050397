package service

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base32"
	"fmt"
	"image/png"
	"net/url"
	"strings"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"
	"github.com/pquerna/otp/totp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
)

// TOTP as every authenticator app does it by default (RFC 6238): HMAC-SHA1,
// six digits, 30-second steps, and one step of clock skew either way.
const (
	totpPeriod = 30
	totpSkew   = 1
	totpDigits = otp.DigitsSix
	// totpSecretSize is the shared secret's size: 160 bits, RFC 4226's
	// recommendation.
	totpSecretSize = 20
	// qrSize is the QR code's width and height in pixels.
	qrSize = 256
)

var totpAlgorithm = otp.AlgorithmSHA1

// Recovery codes: ten, each 16 characters of base32 (80 random bits),
// shown as four groups of four.
const (
	recoveryCodeCount = 10
	recoveryCodeBytes = 10
)

var recoveryEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

var (
	errTOTPRequired = mcpgate.Errorf(mcpgate.ETOTPRequired,
		"enter the 6-digit code from your authenticator app, or one of your recovery codes")
	// A wrong code at login reads like a wrong password: 401, counted by
	// the login throttle.
	errBadLoginCode = mcpgate.Errorf(mcpgate.EUnauthorized, "wrong or already used code")
	// A wrong code from a signed-in person is EInvalid, as a wrong current
	// password is (the session is fine; a 401 would send them to login).
	errWrongCode = mcpgate.Errorf(mcpgate.EInvalid, "the code is not correct, or was already used")
	errTOTPOff   = mcpgate.Errorf(mcpgate.ENotFound, "two-factor sign-in is not on for this account")
	errTOTPOn    = mcpgate.Errorf(mcpgate.EConflict,
		"two-factor sign-in is already on; turn it off first to enrol another device")
)

// TOTPEnabled implements mcpgate.TwoFactorService.
func (s *TwoFactor) TOTPEnabled(ctx context.Context, u *mcpgate.User) (bool, error) {
	return s.db.TOTPEnabled(ctx, u.ID)
}

// BeginTOTP implements mcpgate.TwoFactorService. The current password is
// asked for (under the login throttle) because enrolling is what a thief
// holding only a stolen session would do to lock the owner out: once on,
// the password alone no longer signs in.
func (s *TwoFactor) BeginTOTP(ctx context.Context, u *mcpgate.User, current, addr string) (*mcpgate.TOTPEnrollment, error) {
	if on, err := s.db.TOTPEnabled(ctx, u.ID); err != nil {
		return nil, err
	} else if on {
		return nil, errTOTPOn
	}
	if err := s.checkCurrentPassword(ctx, u, current, addr); err != nil {
		return nil, err
	}
	issuer := s.totpIssuer()
	key, err := totp.Generate(totp.GenerateOpts{Issuer: issuer, AccountName: u.Email, Period: totpPeriod,
		SecretSize: totpSecretSize, Digits: totpDigits, Algorithm: totpAlgorithm, Rand: rand.Reader})
	if err != nil {
		return nil, fmt.Errorf("generate totp key: %w", err)
	}
	img, err := key.Image(qrSize, qrSize)
	if err != nil {
		return nil, fmt.Errorf("render totp qr code: %w", err)
	}
	var qr bytes.Buffer
	if err := png.Encode(&qr, img); err != nil {
		return nil, fmt.Errorf("encode totp qr code: %w", err)
	}
	if err := s.db.BeginTOTP(ctx, s.opts.Keyring, u.ID, mcpgate.Secret(key.Secret())); err != nil {
		return nil, err
	}
	s.recordAccount(ctx, u, mcpgate.ActionTOTPEnrolmentStarted)
	return &mcpgate.TOTPEnrollment{Secret: mcpgate.Secret(key.Secret()), URL: mcpgate.Secret(key.URL()), QRCodePNG: qr.Bytes(),
		Issuer: issuer, Account: u.Email}, nil
}

// totpIssuer names the gateway in authenticator apps: "mcpgate", with the
// host of PUBLIC_URL so that two installations are told apart. The port is
// left out: a colon would end the issuer in the otpauth label.
func (s *TwoFactor) totpIssuer() string {
	if pu, err := url.Parse(s.opts.PublicURL); err == nil && pu.Hostname() != "" {
		return "mcpgate (" + pu.Hostname() + ")"
	}
	return "mcpgate"
}

// ConfirmTOTP implements mcpgate.TwoFactorService. A wrong code is not
// counted by the login throttle: it guesses the code of a secret that the
// session holding it was just given, after the password was checked.
func (s *TwoFactor) ConfirmTOTP(ctx context.Context, u *mcpgate.User, code string) ([]string, error) {
	f, err := s.db.FindTOTP(ctx, s.opts.Keyring, u.ID)
	if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "start setting up two-factor sign-in first")
	}
	if err != nil {
		return nil, err
	}
	if f.Confirmed {
		return nil, errTOTPOn
	}
	step, ok := matchTOTP(f.Secret, code, s.now().Unix())
	if !ok {
		return nil, mcpgate.Errorf(mcpgate.EInvalid,
			"that code is not right: type the 6 digits your app shows now (and check that the device's clock is right)")
	}
	codes, hashes := newRecoveryCodes()
	if err := s.db.ConfirmTOTP(ctx, u.ID, step, hashes); err != nil {
		return nil, err
	}
	s.recordAccount(ctx, u, mcpgate.ActionTOTPEnabled)
	return codes, nil
}

// newRecoveryCodes makes a set of recovery codes, as shown to the person
// (dashed groups of four) and as stored (hashes).
func newRecoveryCodes() (codes []string, hashes [][]byte) {
	codes = make([]string, recoveryCodeCount)
	hashes = make([][]byte, recoveryCodeCount)
	for i := range codes {
		b := make([]byte, recoveryCodeBytes)
		_, _ = rand.Read(b)
		raw := strings.ToLower(recoveryEncoding.EncodeToString(b))
		codes[i] = raw[0:4] + "-" + raw[4:8] + "-" + raw[8:12] + "-" + raw[12:16]
		hashes[i] = hashRecoveryCode(raw)
	}
	return codes, hashes
}

// DisableTOTP implements mcpgate.TwoFactorService.
func (s *TwoFactor) DisableTOTP(ctx context.Context, u *mcpgate.User, code, current, addr string) error {
	if err := s.checkBothFactors(ctx, u, code, current, addr); err != nil {
		return err
	}
	if err := s.db.DisableTOTP(ctx, u.ID); err != nil {
		return err
	}
	s.recordAccount(ctx, u, mcpgate.ActionTOTPDisabled)
	return nil
}

// NewRecoveryCodes implements mcpgate.TwoFactorService.
func (s *TwoFactor) NewRecoveryCodes(ctx context.Context, u *mcpgate.User, code, current, addr string) ([]string, error) {
	if err := s.checkBothFactors(ctx, u, code, current, addr); err != nil {
		return nil, err
	}
	codes, hashes := newRecoveryCodes()
	if err := s.db.ReplaceRecoveryCodes(ctx, u.ID, hashes); err != nil {
		return nil, err
	}
	s.recordAccount(ctx, u, mcpgate.ActionRecoveryCodesRenewed)
	return codes, nil
}

// checkBothFactors checks the current password and a second factor (a TOTP
// code or an unused recovery code, which it spends) before a change to the
// second factor itself: a stolen session alone cannot take it away or
// learn new recovery codes, nor can a stolen password. A wrong code counts
// as a failed login.
func (s *TwoFactor) checkBothFactors(ctx context.Context, u *mcpgate.User, code, current, addr string) error {
	sub, err := s.verifyCurrentPassword(ctx, u, current, addr)
	if err != nil {
		return err
	}
	f, err := s.db.FindTOTP(ctx, s.opts.Keyring, u.ID)
	if mcpgate.ErrorCode(err) == mcpgate.ENotFound || err == nil && !f.Confirmed {
		return errTOTPOff
	}
	if err != nil {
		return err
	}
	c := mcpgate.Credentials{RecoveryCode: code}
	if isTOTPCode(code) {
		c = mcpgate.Credentials{TOTPCode: code}
	}
	if ok, err := s.checkSecondFactor(ctx, u, f, c); err != nil {
		return err
	} else if !ok {
		if err := s.throttle.fail(ctx, sub); err != nil {
			return err
		}
		return errWrongCode
	}
	_ = s.db.ClearLoginFailures(ctx, sub.pair)
	return nil
}

// loginSecondFactor is Login's second step, after the right password: nil
// for a person without two-factor sign-in (codes given are ignored), else
// the code must be right. A wrong one is counted by the login throttle.
func (s *TwoFactor) loginSecondFactor(ctx context.Context, u *mcpgate.User, c mcpgate.Credentials, sub loginSubjects) error {
	f, err := s.db.FindTOTP(ctx, s.opts.Keyring, u.ID)
	if mcpgate.ErrorCode(err) == mcpgate.ENotFound || err == nil && !f.Confirmed {
		return nil
	}
	if err != nil {
		return err
	}
	if c.TOTPCode == "" && c.RecoveryCode == "" {
		return errTOTPRequired
	}
	if c.TOTPCode != "" && c.RecoveryCode != "" {
		return mcpgate.Errorf(mcpgate.EInvalid, "give either a code from your app or a recovery code, not both")
	}
	ok, err := s.checkSecondFactor(ctx, u, f, c)
	if err != nil {
		return err
	}
	if !ok {
		if err := s.throttle.fail(ctx, sub); err != nil {
			return err
		}
		return errBadLoginCode
	}
	return nil
}

// checkSecondFactor checks a TOTP code (not replayed: its time step must be
// later than the last one accepted, recorded in the same UPDATE) or spends a
// recovery code, whichever c holds.
func (s *TwoFactor) checkSecondFactor(ctx context.Context, u *mcpgate.User, f *store.TOTPFactor, c mcpgate.Credentials) (bool, error) {
	if c.TOTPCode != "" {
		step, ok := matchTOTP(f.Secret, c.TOTPCode, s.now().Unix())
		if !ok || step <= f.LastStep {
			return false, nil
		}
		return s.db.AcceptTOTPStep(ctx, u.ID, step)
	}
	raw := normalizeRecoveryCode(c.RecoveryCode)
	if len(raw) != 16 {
		return false, nil
	}
	ok, left, err := s.db.UseRecoveryCode(ctx, u.ID, hashRecoveryCode(raw))
	if err != nil || !ok {
		return false, err
	}
	if ev := s.accountEvent(ctx, u, mcpgate.ActionRecoveryCodeUsed, map[string]any{"codes_left": left}); ev != nil {
		s.record(ctx, *ev)
	}
	return true, nil
}

// matchTOTP returns the time step, within the allowed skew of now (Unix
// seconds), whose code is code. The codes themselves are RFC 4226's, from
// pquerna/otp; the step is found here because the replay check needs it and
// totp.Validate only says yes or no.
func matchTOTP(secret mcpgate.Secret, code string, now int64) (int64, bool) {
	code = strings.ReplaceAll(code, " ", "")
	if !isTOTPCode(code) {
		return 0, false
	}
	opts := hotp.ValidateOpts{Digits: totpDigits, Algorithm: totpAlgorithm}
	cur := now / totpPeriod
	var found int64
	ok := false
	// Every step of the window is computed, matched or not, so the time
	// taken says nothing about which one matched.
	for step := cur - totpSkew; step <= cur+totpSkew; step++ {
		want, err := hotp.GenerateCodeCustom(secret.Reveal(), uint64(step), opts)
		if err != nil {
			return 0, false
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			found, ok = step, true
		}
	}
	return found, ok
}

// isTOTPCode reports whether s is six digits (spaces aside): what an
// authenticator shows, and never a recovery code.
func isTOTPCode(s string) bool {
	s = strings.ReplaceAll(s, " ", "")
	if len(s) != totpDigits.Length() {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// normalizeRecoveryCode drops the dashes and spaces and the case, so that
// a code typed as shown or not matches.
func normalizeRecoveryCode(s string) string {
	return strings.ToLower(strings.NewReplacer("-", "", " ", "").Replace(strings.TrimSpace(s)))
}

// hashRecoveryCode is what is stored of a recovery code: SHA-256, as for MCP
// keys. A slow password hash (argon2id, bcrypt) guards guessable human
// passwords; a code of 80 random bits cannot be walked back from a fast hash,
// and a fast one can be looked up and spent in one indexed UPDATE.
func hashRecoveryCode(normalized string) []byte { return mcpgate.HashToken("recovery|" + normalized) }
