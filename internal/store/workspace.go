package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
)

const wsNotFound = "workspace not found"

func createWorkspace(ctx context.Context, tx pgx.Tx, ownerID, name string, personal bool) (*mcpgate.Workspace, error) {
	w := mcpgate.Workspace{Name: name, Personal: personal, Role: mcpgate.RoleOwner}
	err := tx.QueryRow(ctx, `INSERT INTO workspaces (name, personal) VALUES ($1, $2) RETURNING id, created_at`, name, personal).
		Scan(&w.ID, &w.CreatedAt)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO members (workspace_id, user_id, role) VALUES ($1, $2, 'owner')`, w.ID, ownerID); err != nil {
		return nil, err
	}
	return &w, nil
}

// CreateWorkspace creates a workspace owned by the user.
func (db *DB) CreateWorkspace(ctx context.Context, ownerID, name string) (*mcpgate.Workspace, error) {
	var w *mcpgate.Workspace
	err := db.inTx(ctx, func(tx pgx.Tx) (err error) {
		w, err = createWorkspace(ctx, tx, ownerID, name, false)
		return err
	})
	return w, mapError(err, "user not found")
}

// WorkspacesOfUser lists the workspaces the user belongs to, with their role.
func (db *DB) WorkspacesOfUser(ctx context.Context, userID string) ([]mcpgate.Workspace, error) {
	return listRows(ctx, db, scanMembership, `
		SELECT w.id, w.name, w.personal, w.created_at, w.require_two_factor, w.approval_four_eyes, w.approval_wait_seconds, m.role
		FROM members m JOIN workspaces w ON w.id = m.workspace_id
		WHERE m.user_id = $1 ORDER BY w.personal DESC, w.created_at`, userID)
}

// scanMembership reads a workspace as one member sees it: id, name,
// personal, created_at, require_two_factor, approval_four_eyes,
// approval_wait_seconds and the member's role.
func scanMembership(r pgx.Row, w *mcpgate.Workspace) error {
	return r.Scan(&w.ID, &w.Name, &w.Personal, &w.CreatedAt, &w.RequireTwoFactor, &w.ApprovalFourEyes, &w.ApprovalWaitSeconds, &w.Role)
}

// FindMembership returns the workspace as seen by the user, with their role.
// A workspace the user is not a member of answers ENotFound, exactly like one
// that does not exist.
func (db *DB) FindMembership(ctx context.Context, workspaceID, userID string) (*mcpgate.Workspace, error) {
	if !isUUID(workspaceID) {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, wsNotFound)
	}
	var w mcpgate.Workspace
	err := scanMembership(db.Pool.QueryRow(ctx, `
		SELECT w.id, w.name, w.personal, w.created_at, w.require_two_factor, w.approval_four_eyes, w.approval_wait_seconds, m.role
		FROM members m JOIN workspaces w ON w.id = m.workspace_id
		WHERE m.workspace_id = $1 AND m.user_id = $2`, workspaceID, userID), &w)
	if err != nil {
		return nil, mapError(err, wsNotFound)
	}
	return &w, nil
}

// ListMembers lists a workspace's members.
func (db *DB) ListMembers(ctx context.Context, workspaceID string) ([]mcpgate.Member, error) {
	return listRows(ctx, db, scanMember, `
		SELECT `+memberColumns+`
		FROM members m JOIN users u ON u.id = m.user_id
		WHERE m.workspace_id = $1 ORDER BY m.joined_at`, workspaceID)
}

const memberColumns = `m.workspace_id, m.user_id, u.email, m.role, m.joined_at`

func scanMember(r pgx.Row, m *mcpgate.Member) error {
	return r.Scan(&m.WorkspaceID, &m.UserID, &m.Email, &m.Role, &m.JoinedAt)
}

// isLastOwner locks the workspace's member rows, so that two concurrent
// changes cannot both remove "the other" owner, and reports whether userID
// is its only owner. A user who is not a member is pgx.ErrNoRows.
func isLastOwner(ctx context.Context, tx pgx.Tx, workspaceID, userID string) (bool, error) {
	rows, err := tx.Query(ctx, `SELECT role FROM members WHERE workspace_id = $1 FOR UPDATE`, workspaceID)
	if err != nil {
		return false, err
	}
	roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return false, err
	}
	owners := 0
	for _, r := range roles {
		if r == string(mcpgate.RoleOwner) {
			owners++
		}
	}
	var current mcpgate.Role
	if err := tx.QueryRow(ctx, `SELECT role FROM members WHERE workspace_id = $1 AND user_id = $2`, workspaceID, userID).Scan(&current); err != nil {
		return false, err
	}
	return current == mcpgate.RoleOwner && owners <= 1, nil
}

// UpdateMemberRole changes a member's role. The last owner cannot be demoted.
func (db *DB) UpdateMemberRole(ctx context.Context, workspaceID, userID string, role mcpgate.Role) (*mcpgate.Member, error) {
	if !isUUID(userID) {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "member not found")
	}
	var m mcpgate.Member
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		last, err := isLastOwner(ctx, tx, workspaceID, userID)
		if err != nil {
			return err
		}
		if last && role != mcpgate.RoleOwner {
			return mcpgate.Errorf(mcpgate.EConflict, "the last owner cannot be demoted; make another member owner first")
		}
		return scanMember(tx.QueryRow(ctx, `
			UPDATE members m SET role = $3 FROM users u
			WHERE m.workspace_id = $1 AND m.user_id = $2 AND u.id = m.user_id
			RETURNING `+memberColumns, workspaceID, userID, role), &m)
	})
	if err != nil {
		return nil, mapError(err, "member not found")
	}
	return &m, nil
}

// FindMember returns one member of a workspace.
func (db *DB) FindMember(ctx context.Context, workspaceID, userID string) (*mcpgate.Member, error) {
	if !isUUID(userID) {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "member not found")
	}
	var m mcpgate.Member
	err := scanMember(db.Pool.QueryRow(ctx, `
		SELECT `+memberColumns+`
		FROM members m JOIN users u ON u.id = m.user_id
		WHERE m.workspace_id = $1 AND m.user_id = $2`, workspaceID, userID), &m)
	if err != nil {
		return nil, mapError(err, "member not found")
	}
	return &m, nil
}

// RemoveMember removes a member; their MCP keys in the workspace go with the
// membership (foreign key cascade). The last owner cannot be removed.
func (db *DB) RemoveMember(ctx context.Context, workspaceID, userID string) error {
	if !isUUID(userID) {
		return mcpgate.Errorf(mcpgate.ENotFound, "member not found")
	}
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		last, err := isLastOwner(ctx, tx, workspaceID, userID)
		if err != nil {
			return err
		}
		if last {
			return mcpgate.Errorf(mcpgate.EConflict, "the last owner cannot be removed; make another member owner first")
		}
		_, err = tx.Exec(ctx, `DELETE FROM members WHERE workspace_id = $1 AND user_id = $2`, workspaceID, userID)
		if err == nil {
			err = notifyKeys(ctx, tx, workspaceID)
		}
		return err
	})
	return mapError(err, "member not found")
}

// CreateInvitation stores an invitation; only the token's hash is kept.
func (db *DB) CreateInvitation(ctx context.Context, inv *mcpgate.Invitation, tokenHash []byte) error {
	err := db.Pool.QueryRow(ctx, `
		INSERT INTO invitations (workspace_id, email, role, token_hash, created_by, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id, created_at`,
		inv.WorkspaceID, inv.Email, inv.Role, tokenHash, inv.CreatedBy, inv.ExpiresAt).Scan(&inv.ID, &inv.CreatedAt)
	return mapError(err, wsNotFound)
}

// ListInvitations lists a workspace's open invitations.
func (db *DB) ListInvitations(ctx context.Context, workspaceID string) ([]mcpgate.Invitation, error) {
	return listRows(ctx, db, func(r pgx.Row, i *mcpgate.Invitation) error {
		return r.Scan(&i.ID, &i.WorkspaceID, &i.Email, &i.Role, &i.CreatedBy, &i.CreatedAt, &i.ExpiresAt, &i.AcceptedAt)
	}, `
		SELECT id, workspace_id, email, role, coalesce(created_by::text, ''), created_at, expires_at, accepted_at
		FROM invitations WHERE workspace_id = $1 AND accepted_at IS NULL AND expires_at > now()
		ORDER BY created_at DESC`, workspaceID)
}

// DeleteInvitation withdraws an open invitation.
func (db *DB) DeleteInvitation(ctx context.Context, workspaceID, id string) error {
	if !isUUID(id) {
		return mcpgate.Errorf(mcpgate.ENotFound, "invitation not found")
	}
	tag, err := db.Pool.Exec(ctx, `DELETE FROM invitations WHERE workspace_id = $1 AND id = $2 AND accepted_at IS NULL`, workspaceID, id)
	if err != nil {
		return mapError(err, "invitation not found")
	}
	if tag.RowsAffected() == 0 {
		return mcpgate.Errorf(mcpgate.ENotFound, "invitation not found")
	}
	return nil
}

// FindOpenInvitation returns the invitation with that token hash if it can
// still be accepted.
func (db *DB) FindOpenInvitation(ctx context.Context, tokenHash []byte) (*mcpgate.Invitation, error) {
	var i mcpgate.Invitation
	err := db.Pool.QueryRow(ctx, `
		SELECT id, workspace_id, email, role, created_at, expires_at FROM invitations
		WHERE token_hash = $1 AND accepted_at IS NULL AND expires_at > now()`, tokenHash).
		Scan(&i.ID, &i.WorkspaceID, &i.Email, &i.Role, &i.CreatedAt, &i.ExpiresAt)
	if err != nil {
		return nil, mapError(err, invitationGone)
	}
	return &i, nil
}

const invitationGone = "this invitation is not valid: it was used, withdrawn or has expired"

// AcceptInvitation makes the user a member with the invitation's role. The
// invitation is spent in the same statement that checks it, so it can be
// used once.
func (db *DB) AcceptInvitation(ctx context.Context, tokenHash []byte, userID, email string) (*mcpgate.Workspace, error) {
	var w *mcpgate.Workspace
	err := db.inTx(ctx, func(tx pgx.Tx) (err error) {
		w, err = acceptInvitation(ctx, tx, tokenHash, userID, email)
		return err
	})
	if err != nil {
		return nil, mapError(err, invitationGone)
	}
	return w, nil
}

func acceptInvitation(ctx context.Context, tx pgx.Tx, tokenHash []byte, userID, email string) (*mcpgate.Workspace, error) {
	var wsID, invEmail string
	var role mcpgate.Role
	err := tx.QueryRow(ctx, `
		UPDATE invitations SET accepted_at = now(), accepted_by = $2
		WHERE token_hash = $1 AND accepted_at IS NULL AND expires_at > now()
		RETURNING workspace_id, email, role`, tokenHash, userID).Scan(&wsID, &invEmail, &role)
	if err != nil {
		return nil, err
	}
	if invEmail != email {
		return nil, mcpgate.Errorf(mcpgate.EForbidden, "this invitation was sent to another email address")
	}
	tag, err := tx.Exec(ctx, `INSERT INTO members (workspace_id, user_id, role) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, wsID, userID, role)
	if err != nil {
		return nil, err
	}
	if tag.RowsAffected() == 0 {
		return nil, mcpgate.Errorf(mcpgate.EConflict, "you are already a member of this workspace")
	}
	var w mcpgate.Workspace
	err = tx.QueryRow(ctx, `SELECT id, name, personal, created_at, require_two_factor, approval_four_eyes, approval_wait_seconds
		FROM workspaces WHERE id = $1`, wsID).
		Scan(&w.ID, &w.Name, &w.Personal, &w.CreatedAt, &w.RequireTwoFactor, &w.ApprovalFourEyes, &w.ApprovalWaitSeconds)
	w.Role = role
	return &w, err
}

// SetApprovalFourEyes sets the workspace's rule that a request's approver is
// someone other than its requester.
func (db *DB) SetApprovalFourEyes(ctx context.Context, workspaceID string, on bool) error {
	tag, err := db.Pool.Exec(ctx, `UPDATE workspaces SET approval_four_eyes = $2 WHERE id = $1`, workspaceID, on)
	if err != nil {
		return mapError(err, wsNotFound)
	}
	if tag.RowsAffected() == 0 {
		return mcpgate.Errorf(mcpgate.ENotFound, wsNotFound)
	}
	return nil
}

// DecisionPolicy is what a workspace asks of a person who decides for the
// human in the loop, read in one query: whether it requires two-factor
// sign-in, whether it requires four eyes, and whether the user has TOTP on.
func (db *DB) DecisionPolicy(ctx context.Context, workspaceID, userID string) (twoFactor, fourEyes, enrolled bool, err error) {
	err = db.Pool.QueryRow(ctx, `
		SELECT w.require_two_factor, w.approval_four_eyes,
		       EXISTS (SELECT 1 FROM totp_factors f WHERE f.user_id = $2 AND f.confirmed_at IS NOT NULL)
		FROM workspaces w WHERE w.id = $1`, workspaceID, userID).Scan(&twoFactor, &fourEyes, &enrolled)
	return twoFactor, fourEyes, enrolled, mapError(err, wsNotFound)
}

// PruneExpired deletes spent rows that no longer matter: expired sessions,
// spent confirmation tokens past their expiry, sign-ups whose link expired,
// stale login failures.
func (db *DB) PruneExpired(ctx context.Context, loginWindow time.Duration) error {
	_, err := db.Pool.Exec(ctx, `
		WITH s AS (DELETE FROM sessions WHERE expires_at < now() - interval '1 day'),
		     t AS (DELETE FROM spent_tokens WHERE expires_at < now()),
		     a AS (DELETE FROM account_tokens WHERE expires_at < now() - interval '1 day'),
		     p AS (DELETE FROM pending_signups WHERE expires_at < now())
		DELETE FROM login_failures WHERE window_start < now() - make_interval(secs => $1)`, loginWindow.Seconds())
	return mapError(err, "")
}
