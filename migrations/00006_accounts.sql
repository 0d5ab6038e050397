-- +goose Up
-- Single-use links sent by email (password reset, email verification). Only
-- the SHA-256 of the token is stored; a link is spent by setting used_at in
-- the same statement that checks it, so it works once even under a race.
CREATE TABLE account_tokens (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id    uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    purpose    text NOT NULL CHECK (purpose IN ('reset', 'verify', 'email_change')),
    token_hash bytea NOT NULL UNIQUE,
    -- email is the address the link was sent to (for verify: the address
    -- being confirmed; for email_change: the new address, which takes
    -- effect only when the link is opened).
    email      text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);
CREATE INDEX account_tokens_user_idx ON account_tokens (user_id, purpose);

-- When the person proved they read mail at their address (a verification or
-- reset link). Accounts from before this migration count as verified: they
-- were made under rules that did not ask, and taking their keys away on
-- upgrade would break working clients.
ALTER TABLE users ADD COLUMN email_verified_at timestamptz;
UPDATE users SET email_verified_at = created_at;

-- Where and how a dashboard session was made, for the person's own list.
ALTER TABLE sessions ADD COLUMN address text NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN user_agent text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sessions DROP COLUMN user_agent;
ALTER TABLE sessions DROP COLUMN address;
ALTER TABLE users DROP COLUMN email_verified_at;
DROP TABLE account_tokens;
