-- +goose Up
-- A mailed link stands on what it was issued for (issue 24): password_fp is
-- the SHA-256 of the person's password hash when the link was made, and the
-- link works only while the password hash still has that digest. A password
-- change, a reset or a password set by any other path therefore ends every
-- link issued before it, even one that nothing deleted. Links made before
-- this migration have none and no longer work: they last 30 minutes (reset)
-- or a day (verification), and a new one is a click away.
ALTER TABLE account_tokens ADD COLUMN password_fp bytea;

-- Four eyes: when on, a person may not approve or deny a request their own
-- key or app made, nor confirm in the dashboard a call that needs a human's
-- approval; another owner or admin decides.
ALTER TABLE workspaces ADD COLUMN approval_four_eyes boolean NOT NULL DEFAULT false;

-- A sign-up where SIGNUP_VERIFY=required waits here until the link mailed to
-- the address is opened; only then is the account made. So a sign-up answers
-- the same whether or not the address has an account (its owner is mailed
-- instead), and nobody can hold an address they do not read. Only the
-- SHA-256 of the token is stored; password_hash is the argon2id hash the
-- account will have.
CREATE TABLE pending_signups (
    token_hash    bytea PRIMARY KEY,
    email         text NOT NULL,
    password_hash text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL
);
CREATE INDEX pending_signups_email_idx ON pending_signups (email);

-- +goose Down
DROP TABLE pending_signups;
ALTER TABLE workspaces DROP COLUMN approval_four_eyes;
ALTER TABLE account_tokens DROP COLUMN password_fp;
