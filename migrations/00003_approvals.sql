-- +goose Up
-- A tool's policy names its approval mode instead of a boolean. The old
-- column stays, written alongside (approval <> 'none'), so that replicas
-- still running the previous release read a policy no weaker than before
-- during a rolling upgrade; a later migration may drop it.
ALTER TABLE tool_policies ADD COLUMN approval text NOT NULL DEFAULT 'none'
    CHECK (approval IN ('none', 'model', 'human'));
-- true meant the two-step confirmation, which is now "model". A kill row
-- with true kept the kill tool's default, and that default is now "human":
-- a workspace that enabled kill before this release gets the stronger mode,
-- not a weaker one than new workspaces.
UPDATE tool_policies SET approval = CASE
    WHEN needs_confirmation AND tool = 'e2b_kill_sandbox' THEN 'human'
    WHEN needs_confirmation THEN 'model'
    ELSE 'none' END;

-- Calls waiting for, or given, a person's approval in the dashboard. The
-- arguments are stored redacted, for display; args_hash (SHA-256 of the
-- exact arguments) binds the approval to the call. state 'expired' is set
-- when an expired request is touched; until then a pending or approved row
-- past expires_at reads as expired.
CREATE TABLE approvals (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
    key_id       text NOT NULL DEFAULT '',
    grant_id     text NOT NULL DEFAULT '',
    user_id      uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    tool         text NOT NULL,
    tool_title   text NOT NULL DEFAULT '',
    arguments    jsonb NOT NULL DEFAULT '{}',
    args_hash    text NOT NULL,
    summary      text NOT NULL DEFAULT '',
    state        text NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'approved', 'denied', 'expired', 'used')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    decided_by   uuid REFERENCES users ON DELETE SET NULL,
    decided_at   timestamptz,
    used_at      timestamptz
);
CREATE INDEX approvals_workspace_idx ON approvals (workspace_id, created_at DESC);
CREATE INDEX approvals_pending_idx ON approvals (workspace_id, user_id) WHERE state = 'pending';

-- A workspace's guardrails. No row: no limits beyond the upstream's.
CREATE TABLE workspace_guardrails (
    workspace_id      uuid PRIMARY KEY REFERENCES workspaces ON DELETE CASCADE,
    max_timeout       int NOT NULL DEFAULT 0 CHECK (max_timeout >= 0),
    max_running       int NOT NULL DEFAULT 0 CHECK (max_running >= 0),
    allowed_templates text[] NOT NULL DEFAULT '{}',
    updated_by        uuid REFERENCES users ON DELETE SET NULL,
    updated_at        timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE workspace_guardrails;
DROP TABLE approvals;
ALTER TABLE tool_policies DROP COLUMN approval;
