-- +goose Up
CREATE TABLE users (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    email          text NOT NULL UNIQUE CHECK (email = lower(email)),
    password_hash  text NOT NULL,
    instance_admin boolean NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE workspaces (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name       text NOT NULL,
    personal   boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE members (
    workspace_id uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
    user_id      uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    role         text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    joined_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, user_id)
);
CREATE INDEX members_user_idx ON members (user_id);

CREATE TABLE invitations (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
    email        text NOT NULL,
    role         text NOT NULL CHECK (role IN ('admin', 'member')),
    token_hash   bytea NOT NULL UNIQUE,
    created_by   uuid REFERENCES users ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    accepted_at  timestamptz,
    accepted_by  uuid REFERENCES users ON DELETE SET NULL
);
CREATE INDEX invitations_workspace_idx ON invitations (workspace_id, created_at DESC);

-- Dashboard sessions. The JWT carries the id; logout revokes the row, so a
-- stolen cookie dies with the session rather than at its expiry.
CREATE TABLE sessions (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id    uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX sessions_user_idx ON sessions (user_id);

-- Failed logins per subject ("email:..." or "addr:..."), shared by every
-- replica so that throttling holds behind a load balancer.
CREATE TABLE login_failures (
    subject      text PRIMARY KEY,
    failures     int NOT NULL,
    window_start timestamptz NOT NULL
);

-- Vault data keys, each wrapped by the root key. The highest term seals.
CREATE TABLE vault_keys (
    term       int PRIMARY KEY CHECK (term > 0),
    wrapped    bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- A value sealed under the root key, so that a wrong ENCRYPTION_KEY is refused
-- at start-up instead of failing on every row.
CREATE TABLE vault_check (
    id    boolean PRIMARY KEY DEFAULT true CHECK (id),
    value bytea NOT NULL
);

-- Stored upstream credentials, sealed. The additional data of the ciphertext
-- binds it to workspace_id and id, so a ciphertext copied to another row does
-- not open. key_term mirrors the header's term for re-seal queries.
CREATE TABLE connections (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id         uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
    connector            text NOT NULL,
    ciphertext           bytea NOT NULL,
    key_term             int NOT NULL,
    key_hint             text NOT NULL,
    verified_at          timestamptz NOT NULL,
    updated_by           uuid REFERENCES users ON DELETE SET NULL,
    updated_at           timestamptz NOT NULL DEFAULT now(),
    last_auth_failure_at timestamptz,
    UNIQUE (workspace_id, connector)
);
CREATE INDEX connections_term_idx ON connections (key_term);

-- MCP keys. Only the SHA-256 of the secret part is kept. The foreign key to
-- members makes a member's keys die with their membership.
CREATE TABLE api_keys (
    id           text PRIMARY KEY,
    workspace_id uuid NOT NULL,
    user_id      uuid NOT NULL,
    name         text NOT NULL,
    scope        text NOT NULL CHECK (scope IN ('full', 'read_only')),
    secret_hash  bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz,
    FOREIGN KEY (workspace_id, user_id) REFERENCES members ON DELETE CASCADE
);
CREATE INDEX api_keys_workspace_idx ON api_keys (workspace_id, created_at DESC);

-- A workspace's overrides of a tool's defaults. No row: the connector's default.
CREATE TABLE tool_policies (
    workspace_id       uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
    tool               text NOT NULL,
    enabled            boolean NOT NULL,
    needs_confirmation boolean NOT NULL,
    updated_by         uuid REFERENCES users ON DELETE SET NULL,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, tool)
);

-- Confirmation tokens already spent, so that a token is single-use on every
-- replica. Rows are useless after expires_at and are pruned.
CREATE TABLE spent_tokens (
    id         text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);

CREATE TABLE audit_log (
    id              bigserial PRIMARY KEY,
    workspace_id    uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
    actor_id        uuid REFERENCES users ON DELETE SET NULL,
    key_id          text,
    kind            text NOT NULL CHECK (kind IN ('tool_call', 'admin')),
    action          text NOT NULL,
    arguments       jsonb,
    outcome         text NOT NULL,
    message         text NOT NULL DEFAULT '',
    upstream_status int,
    duration_ms     double precision NOT NULL DEFAULT 0,
    source          text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_workspace_idx ON audit_log (workspace_id, id DESC);
CREATE INDEX audit_log_actor_idx ON audit_log (workspace_id, actor_id, id DESC);

-- +goose Down
DROP TABLE audit_log;
DROP TABLE spent_tokens;
DROP TABLE tool_policies;
DROP TABLE api_keys;
DROP TABLE connections;
DROP TABLE vault_check;
DROP TABLE vault_keys;
DROP TABLE login_failures;
DROP TABLE sessions;
DROP TABLE invitations;
DROP TABLE members;
DROP TABLE workspaces;
DROP TABLE users;
