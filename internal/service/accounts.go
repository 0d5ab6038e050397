package service

import (
	"context"
	"errors"
	"math"
	"net/netip"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/mail"
	"github.com/mcpgate/mcpgate/internal/password"
	"github.com/mcpgate/mcpgate/internal/store"
)

// Signup implements mcpgate.AccountService.
func (s *Accounts) Signup(ctx context.Context, email, pw, invitation, addr string) (*mcpgate.User, error) {
	email, err := mcpgate.NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	if err := mcpgate.ValidatePassword(pw); err != nil {
		return nil, err
	}
	if err := s.checkSignupRate(ctx, addr); err != nil {
		return nil, err
	}
	var invHash []byte
	if invitation != "" {
		invHash = mcpgate.HashToken(invitation)
		inv, err := s.db.FindOpenInvitation(ctx, invHash)
		if err != nil {
			return nil, err
		}
		if inv.Email != email {
			return nil, mcpgate.Errorf(mcpgate.EForbidden, "this invitation was sent to another email address")
		}
	} else if s.opts.Signup == SignupInvite {
		return nil, mcpgate.Errorf(mcpgate.EForbidden, "sign-up on this instance needs an invitation; ask a workspace admin for one")
	}
	hash, err := s.hashPassword(ctx, pw)
	if err != nil {
		return nil, err
	}
	if s.opts.RequireVerifiedEmail {
		// The account waits for the address to be confirmed, and joining
		// for the account: the person opens the invitation again then.
		return nil, s.signupByLink(ctx, email, hash, addr)
	}
	u, err := s.db.CreateUser(ctx, email, hash, invHash)
	if err != nil {
		return nil, err
	}
	if s.opts.Mailer != nil {
		if err := s.sendVerification(ctx, u); err != nil {
			s.log.WarnContext(ctx, "verification mail not sent at signup", "err", err)
		}
	}
	return u, nil
}

// signupByLink is Signup where SIGNUP_VERIFY=required: the
// answer is the same whether or not the address has an account, so that
// sign-up tells nobody who has one. A new address gets a link that creates
// the account when it is opened (and until then nothing holds the address:
// someone who does not read it cannot take it first); the owner of a known
// address is told that somebody tried, with a way to sign in. Both mails
// are throttled like every other (per target address and client address),
// and the password was hashed before the address is looked up, so the two
// cost the same time.
func (s *Accounts) signupByLink(ctx context.Context, email, passwordHash, addr string) error {
	if s.opts.Mailer == nil {
		return errNoMail
	}
	if err := s.throttleMail(ctx, mailSend{kind: "signup", to: email, client: addr,
		refusal: "a few sign-up links were sent to this address already; check its inbox (and spam folder), or wait a few minutes"}); err != nil {
		return err
	}
	u, _, err := s.db.FindUserByEmail(ctx, email)
	if err == nil {
		return s.sendMail(ctx, u, mail.KindAccountExists, "/login")
	}
	if mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		return err
	}
	tok, tokHash := newAccountToken()
	if err := s.db.CreatePendingSignup(ctx, email, passwordHash, tokHash, s.now().Add(verifyTTL)); err != nil {
		return err
	}
	// No account yet: the mail's outcome belongs to no audit log.
	return s.sendMail(ctx, &mcpgate.User{Email: email}, mail.KindVerify, "/verify-email?token="+tok)
}

var errBadLogin = mcpgate.Errorf(mcpgate.EUnauthorized, "wrong email or password")

// dummyHash is verified when the email is unknown, so that a wrong email
// costs the same time as a wrong password and does not reveal accounts. It
// is a constant (of "dummy password for timing" under password.Default;
// TestDummyHash keeps the two in step) so that it never has to be computed
// under load, where the hashing budget might refuse it.
const dummyHash = "$argon2id$v=19$m=65536,t=3,p=2$ZtMy0NrkZ/ujIyJ+H30ssw$xDy3JQrGV/Saqe2u9H/4uAhjYsIrm5zpeNEaU/YKa/4"

// Login implements mcpgate.AccountService. The second factor is asked for
// only once the password is right, so that a code's answer says nothing to
// someone who does not know the password.
func (s *Accounts) Login(ctx context.Context, c mcpgate.Credentials, addr string) (*mcpgate.User, error) {
	email, err := mcpgate.NormalizeEmail(c.Email)
	if err != nil {
		return nil, errBadLogin
	}
	sub := s.throttle.subjects(email, addr)
	if err := s.throttle.check(ctx, sub); err != nil {
		return nil, err
	}
	u, hash, err := s.db.FindUserByEmail(ctx, email)
	if err != nil && mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		return nil, err
	}
	if u == nil {
		hash = dummyHash
	}
	if err := s.verifyPassword(ctx, c.Password, hash); err != nil && !errors.Is(err, password.ErrMismatch) {
		return nil, err
	} else if err != nil || u == nil {
		if err := s.throttle.fail(ctx, sub); err != nil {
			return nil, err
		}
		return nil, errBadLogin
	}
	if err := s.twoFactor.loginSecondFactor(ctx, u, c, sub); err != nil {
		return nil, err
	}
	_ = s.db.ClearLoginFailures(ctx, sub.pair)
	return u, nil
}

// loginThrottle refuses logins after too many failures in a window. The
// counts live in Postgres so that every replica enforces the same limit.
//
// What it counts, and why: a limit per email alone hands anyone a
// switch that locks a person out (five bad passwords, repeated forever), and
// a limit per address alone lets a botnet guess one account's password
// forever. So:
//   - per email and address pair (perPair, 5): a guesser at one address gets
//     five tries at an account; the person at another address is unaffected;
//   - per address (perAddress, 30): one address spraying many accounts;
//   - per email, from everywhere (perEmail, 100, the gentler ceiling): a
//     guess spread over many addresses. Past it, an address that has failed
//     in the window is refused outright, and an address with no failures
//     may still try: the right password gets in, a wrong one is a failure
//     that spends the address. A distributed guesser is held to one try per
//     fresh address per window, and the owner of the account, trying from
//     an address that has not been failing, is never refused.
//
// The owner can still be refused at an address they share with the
// guesser (one NAT, or a proxy that is not in TRUSTED_PROXIES): that pair
// is the guesser's too.
type loginThrottle struct {
	db         *store.DB
	period     time.Duration
	perPair    int
	perAddress int
	perEmail   int
}

// loginSubjects are the throttle's counters for one attempt.
type loginSubjects struct{ pair, addr, email string }

func (t loginThrottle) subjects(email, addr string) loginSubjects {
	a := addressSubject(addr)
	return loginSubjects{pair: "pair:" + a + "|" + email, addr: "addr:" + a, email: "email:" + email}
}

const errTooManyLogins = "too many failed logins; wait a few minutes and try again"

// fail counts a failed attempt (a wrong password, or a wrong second factor
// after the right password) against every counter of sub.
func (t loginThrottle) fail(ctx context.Context, sub loginSubjects) error {
	return t.db.RecordLoginFailure(ctx, t.period, sub.pair, sub.addr, sub.email)
}

func (t loginThrottle) check(ctx context.Context, sub loginSubjects) error {
	count := func(subject string) (int, time.Time, error) { return t.db.LoginFailures(ctx, subject, t.period) }
	refuse := func(start time.Time) error { return t.refusal(start, errTooManyLogins) }
	n, start, err := count(sub.pair)
	if err != nil {
		return err
	}
	if n >= t.perPair {
		return refuse(start)
	}
	nAddr, startAddr, err := count(sub.addr)
	if err != nil {
		return err
	}
	if nAddr >= t.perAddress {
		return refuse(startAddr)
	}
	n, start, err = count(sub.email)
	if err != nil {
		return err
	}
	if n >= t.perEmail && nAddr > 0 {
		return refuse(start)
	}
	return nil
}

// refusal is the 429 for a window that started at start.
func (t loginThrottle) refusal(start time.Time, msg string) error {
	return windowRefusal(start, t.period, msg)
}

// windowRefusal is the 429 for a counting window of length window that
// started at start: Retry-After is when it ends.
func windowRefusal(start time.Time, window time.Duration, msg string) error {
	wait := int(math.Ceil(time.Until(start.Add(window)).Seconds()))
	return &mcpgate.Error{Code: mcpgate.ETooMany, RetryAfter: max(wait, 1), Message: msg}
}

// addressSubject is what per-address limits count: the address, or for
// IPv6 its /64, since one host or home line is given a whole /64 and could
// otherwise use a fresh address for every attempt.
func addressSubject(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Is6() || a.Is4In6() {
		return addr
	}
	p, _ := a.Prefix(64)
	return p.String()
}
