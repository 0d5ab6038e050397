-- +goose Up
-- OAuth 2.1 for MCP clients (design §12). Every secret (code, access token,
-- refresh token) is kept only as its SHA-256, like MCP keys.

-- Clients: registered by DCR (kind dcr, a random id) or known by their client
-- ID metadata document (kind cimd, the document's https URL as id, cached
-- here with fetched_at). used_at is set by the first grant; a DCR client that
-- never got one is pruned after a day.
CREATE TABLE oauth_clients (
    id              text PRIMARY KEY,
    kind            text NOT NULL CHECK (kind IN ('dcr', 'cimd')),
    name            text NOT NULL,
    client_uri      text NOT NULL DEFAULT '',
    redirect_uris   text[] NOT NULL,
    registered_from text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    fetched_at      timestamptz NOT NULL DEFAULT now(),
    used_at         timestamptz
);
CREATE INDEX oauth_clients_unused_idx ON oauth_clients (created_at) WHERE used_at IS NULL;

-- A person's consent: one client, one workspace, one access level. Tokens
-- hang off it; revoking it ends them all. The foreign key to members ends a
-- member's grants with their membership.
CREATE TABLE oauth_grants (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id uuid NOT NULL,
    user_id      uuid NOT NULL,
    client_id    text NOT NULL REFERENCES oauth_clients ON DELETE CASCADE,
    scope        text NOT NULL CHECK (scope IN ('full', 'read_only')),
    resource     text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz,
    FOREIGN KEY (workspace_id, user_id) REFERENCES members ON DELETE CASCADE
);
CREATE INDEX oauth_grants_workspace_idx ON oauth_grants (workspace_id, created_at DESC);

-- Authorization codes: single use (used_at), 60 seconds, bound to client,
-- redirect URI, PKCE challenge and resource. grant_id is the grant the code
-- was redeemed for, revoked if the code is presented again.
CREATE TABLE oauth_codes (
    hash           bytea PRIMARY KEY,
    client_id      text NOT NULL REFERENCES oauth_clients ON DELETE CASCADE,
    workspace_id   uuid NOT NULL,
    user_id        uuid NOT NULL,
    redirect_uri   text NOT NULL,
    code_challenge text NOT NULL,
    resource       text NOT NULL,
    scope          text NOT NULL CHECK (scope IN ('full', 'read_only')),
    expires_at     timestamptz NOT NULL,
    used_at        timestamptz,
    grant_id       uuid REFERENCES oauth_grants ON DELETE SET NULL,
    FOREIGN KEY (workspace_id, user_id) REFERENCES members ON DELETE CASCADE
);

-- Access and refresh tokens of a grant. A refresh token is spent (used_at)
-- when rotated; presenting a spent one revokes its grant.
CREATE TABLE oauth_tokens (
    hash       bytea PRIMARY KEY,
    grant_id   uuid NOT NULL REFERENCES oauth_grants ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('access', 'refresh')),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);
CREATE INDEX oauth_tokens_grant_idx ON oauth_tokens (grant_id);

-- The audit log names the grant and client of a call made with an OAuth
-- token. No foreign key: the log outlives revoked and deleted grants.
ALTER TABLE audit_log ADD COLUMN grant_id uuid, ADD COLUMN client_name text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE audit_log DROP COLUMN grant_id, DROP COLUMN client_name;
DROP TABLE oauth_tokens;
DROP TABLE oauth_codes;
DROP TABLE oauth_grants;
DROP TABLE oauth_clients;
