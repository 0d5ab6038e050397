-- +goose Up
-- How a workspace hears of approvals (issue 28): mail to the people who may
-- decide, and a signed webhook. No row: no notifications.
CREATE TABLE workspace_notifications (
    workspace_id   uuid PRIMARY KEY REFERENCES workspaces ON DELETE CASCADE,
    email          boolean NOT NULL DEFAULT false,
    webhook_url    text NOT NULL DEFAULT '',
    webhook_format text NOT NULL DEFAULT 'json' CHECK (webhook_format IN ('json', 'slack')),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- The webhook's signing secret, sealed with the vault (AAD bound to the
-- workspace and this row's id) like an E2B key; hint is what the API shows.
CREATE TABLE webhook_secrets (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id uuid NOT NULL UNIQUE REFERENCES workspaces ON DELETE CASCADE,
    secret       bytea NOT NULL,
    key_term     bigint NOT NULL,
    hint         text NOT NULL
);
CREATE INDEX webhook_secrets_term_idx ON webhook_secrets (key_term);

-- One row per webhook event sent (or being sent), for the admins to see.
CREATE TABLE webhook_deliveries (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
    approval_id  uuid NOT NULL,
    event        text NOT NULL,
    state        text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts     int NOT NULL DEFAULT 0,
    last_status  int NOT NULL DEFAULT 0,
    last_error   text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_workspace_idx ON webhook_deliveries (workspace_id, created_at DESC);

-- Who was mailed about an approval: at most one mail per approval per person.
CREATE TABLE approval_notices (
    approval_id uuid NOT NULL REFERENCES approvals ON DELETE CASCADE,
    user_id     uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    PRIMARY KEY (approval_id, user_id)
);

-- +goose Down
DROP TABLE approval_notices;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_secrets;
DROP TABLE workspace_notifications;
