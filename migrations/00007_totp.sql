-- +goose Up
-- Two-factor sign-in (TOTP, RFC 6238). One row per person: pending from
-- enrolment until the first code is confirmed (confirmed_at set), then in
-- force until disabled (the row is deleted). The shared secret is sealed
-- with the vault like an E2B key (additional data "totp|v1|<user>|<id>", so
-- a ciphertext copied to another row does not open), and key_term mirrors
-- the header's term for the re-seal job and `vault prune`. last_step is the
-- last 30-second time step whose code was accepted: a code is taken only for
-- a later step, so a code seen over a shoulder or in a log cannot be replayed.
CREATE TABLE totp_factors (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id      uuid NOT NULL UNIQUE REFERENCES users ON DELETE CASCADE,
    secret       bytea NOT NULL,
    key_term     int NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    confirmed_at timestamptz,
    last_step    bigint NOT NULL DEFAULT 0
);
CREATE INDEX totp_factors_term_idx ON totp_factors (key_term);

-- One-time recovery codes: only their SHA-256 is stored (each holds 80
-- random bits, so a fast hash cannot be walked back). A code is spent by
-- setting used_at in the statement that checks it.
CREATE TABLE totp_recovery_codes (
    user_id   uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    code_hash bytea NOT NULL,
    used_at   timestamptz,
    PRIMARY KEY (user_id, code_hash)
);

-- A workspace owner may require two-factor sign-in of the workspace's owners
-- and admins before they change tools, approvals, guardrails or credentials.
ALTER TABLE workspaces ADD COLUMN require_two_factor boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE workspaces DROP COLUMN require_two_factor;
DROP TABLE totp_recovery_codes;
DROP TABLE totp_factors;
