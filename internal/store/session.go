package store

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
)

// maxUserAgent bounds what is kept of a browser's User-Agent.
const maxUserAgent = 200

// DescribeSession records where a session was made. The User-Agent is the
// client's to choose: control characters (a NUL would make Postgres refuse
// the row, and the login with it) and invalid UTF-8 are dropped.
func (db *DB) DescribeSession(ctx context.Context, sessionID, address, userAgent string) error {
	userAgent = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return -1
		}
		return r
	}, strings.ToValidUTF8(userAgent, ""))
	if len(userAgent) > maxUserAgent {
		userAgent = userAgent[:maxUserAgent]
		for !utf8.ValidString(userAgent) {
			userAgent = userAgent[:len(userAgent)-1]
		}
	}
	_, err := db.Pool.Exec(ctx, `UPDATE sessions SET address = $2, user_agent = $3 WHERE id = $1`, sessionID, address, userAgent)
	return mapError(err, "")
}

// SessionsOfUser lists a user's live sessions, newest first.
func (db *DB) SessionsOfUser(ctx context.Context, userID string) ([]mcpgate.Session, error) {
	return listRows(ctx, db, func(r pgx.Row, s *mcpgate.Session) error {
		return r.Scan(&s.ID, &s.CreatedAt, &s.ExpiresAt, &s.Address, &s.UserAgent)
	}, `
		SELECT id, created_at, expires_at, address, user_agent FROM sessions
		WHERE user_id = $1 AND revoked_at IS NULL AND expires_at > now()
		ORDER BY created_at DESC, id`, userID)
}

// RevokeUserSession ends one session of the user; a session of anyone else
// (or none) is ENotFound.
func (db *DB) RevokeUserSession(ctx context.Context, userID, sessionID string) error {
	if !isUUID(sessionID) {
		return mcpgate.Errorf(mcpgate.ENotFound, "session not found")
	}
	tag, err := db.Pool.Exec(ctx, `UPDATE sessions SET revoked_at = now() WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL`, sessionID, userID)
	if err != nil {
		return mapError(err, "session not found")
	}
	if tag.RowsAffected() == 0 {
		return mcpgate.Errorf(mcpgate.ENotFound, "session not found")
	}
	return nil
}

// RevokeOtherSessions ends every live session of the user but keepID.
func (db *DB) RevokeOtherSessions(ctx context.Context, userID, keepID string) (int, error) {
	if !isUUID(keepID) {
		keepID = "00000000-0000-0000-0000-000000000000"
	}
	tag, err := db.Pool.Exec(ctx, `UPDATE sessions SET revoked_at = now() WHERE user_id = $1 AND id <> $2 AND revoked_at IS NULL`, userID, keepID)
	if err != nil {
		return 0, mapError(err, "")
	}
	return int(tag.RowsAffected()), nil
}
