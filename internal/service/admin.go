package service

import (
	"context"

	"github.com/mcpgate/mcpgate"
)

// Admin is the operator's service: what `mcpgate user` does to the accounts
// of the instance from the server, for when nobody can sign in as an instance
// admin. Its caller is whoever can reach the database already, so it takes
// no Actor and checks no role; what it keeps of the rules is everything
// else: each change is audited (source mcpgate.SourceOperator, in the
// account's personal workspace, where its owner sees it) and has the side
// effects the person's own way to it has.
type Admin struct{ core }

// NewAdmin returns the operator's service; of the options it uses DB,
// Audit, Logger, Now and PasswordParams.
func NewAdmin(opts Options) *Admin { return &Admin{newCore(opts.withCoreDefaults())} }

// RevokedCredentials counts what a revocation of every credential of a
// person revoked.
type RevokedCredentials struct{ Keys, Grants int }

// Users lists every account of the instance, oldest first.
func (a *Admin) Users(ctx context.Context) ([]mcpgate.User, error) { return a.db.ListUsers(ctx) }

// SetInstanceAdmin gives or withdraws instance admin.
func (a *Admin) SetInstanceAdmin(ctx context.Context, email string, on bool) error {
	u, err := a.account(ctx, email)
	if err != nil {
		return err
	}
	if err := a.db.SetInstanceAdmin(ctx, u.Email, on); err != nil {
		return err
	}
	a.recordAccountFrom(ctx, u, mcpgate.SourceOperator, mcpgate.ActionInstanceAdminChanged, map[string]any{"instance_admin": on})
	return nil
}

// ResetPassword sets a new password, as an emailed reset link does: every
// session of the account ends, its other open links stop working and its
// failed logins are forgotten. Its MCP keys and OAuth grants keep working
// (RevokeCredentials ends them) and two-factor sign-in stays on. The audit
// event names no password.
func (a *Admin) ResetPassword(ctx context.Context, email, newPassword string) error {
	if err := mcpgate.ValidatePassword(newPassword); err != nil {
		return err
	}
	u, err := a.account(ctx, email)
	if err != nil {
		return err
	}
	hash, err := a.hashPassword(ctx, newPassword)
	if err != nil {
		return err
	}
	if err := a.db.SetPassword(ctx, u.ID, hash); err != nil {
		return err
	}
	_ = a.db.ClearLoginFailures(ctx, "email:"+u.Email)
	a.recordAccountFrom(ctx, u, mcpgate.SourceOperator, mcpgate.ActionPasswordReset, nil)
	return nil
}

// RevokeCredentials revokes every MCP key and OAuth grant of the account, in
// every workspace, as a reset link's "also revoke" does; every replica drops
// them from its caches at once.
func (a *Admin) RevokeCredentials(ctx context.Context, email string) (RevokedCredentials, error) {
	u, err := a.account(ctx, email)
	if err != nil {
		return RevokedCredentials{}, err
	}
	return a.revokeCredentials(ctx, u, mcpgate.SourceOperator)
}

// DisableTOTP turns two-factor sign-in off and deletes the recovery codes,
// for a person who lost both.
func (a *Admin) DisableTOTP(ctx context.Context, email string) error {
	u, err := a.account(ctx, email)
	if err != nil {
		return err
	}
	if err := a.db.DisableTOTP(ctx, u.ID); mcpgate.ErrorCode(err) == mcpgate.ENotFound {
		return mcpgate.Errorf(mcpgate.ENotFound, "%s has no two-factor sign-in", u.Email)
	} else if err != nil {
		return err
	}
	a.recordAccountFrom(ctx, u, mcpgate.SourceOperator, mcpgate.ActionTOTPDisabled, nil)
	return nil
}

// account finds the account of an address, normalised.
func (a *Admin) account(ctx context.Context, email string) (*mcpgate.User, error) {
	email, err := mcpgate.NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	u, _, err := a.db.FindUserByEmail(ctx, email)
	if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "no account with the email %s", email)
	}
	return u, err
}
