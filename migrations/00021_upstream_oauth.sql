-- +goose Up
-- OAuth to upstream MCP servers: a server added with the credential kind
-- "oauth" has one row here, with what the gateway found at discovery (the
-- resource, its authorization server and that server's metadata) and how
-- the gateway registered itself there (a client ID metadata document or
-- Dynamic Client Registration). The registration is per workspace, server
-- and issuer: a server whose issuer changes is registered again.
CREATE TABLE upstream_server_oauth (
    id               uuid PRIMARY KEY REFERENCES upstream_servers ON DELETE CASCADE,
    workspace_id     uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
    -- Each member connects their own account (item 4); false: one grant
    -- for the workspace, connected by an admin.
    per_person       boolean NOT NULL DEFAULT false,
    resource         text NOT NULL,
    issuer           text NOT NULL,
    -- The authorization server's metadata (RFC 8414) as fetched.
    metadata         jsonb NOT NULL,
    scopes           text NOT NULL DEFAULT '',
    client_id        text NOT NULL,
    registration     text NOT NULL CHECK (registration IN ('cimd', 'dcr')),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- A confidential client's secret from Dynamic Client Registration, sealed
-- and bound (AAD) to the workspace and the server. No row: a public client.
CREATE TABLE upstream_oauth_client_secrets (
    id           uuid PRIMARY KEY REFERENCES upstream_server_oauth ON DELETE CASCADE,
    workspace_id uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
    sealed       bytea NOT NULL,
    key_term     bigint NOT NULL
);
CREATE INDEX upstream_oauth_client_secrets_term_idx ON upstream_oauth_client_secrets (key_term);

-- The tokens of one connection: the workspace's (user_id NULL) or one
-- person's, for one server and issuer. The access and refresh tokens are
-- one sealed JSON object whose additional data binds it to aad_owner
-- (workspace, server, issuer, person) and the row's id.
CREATE TABLE upstream_oauth_grants (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
    server_id    uuid NOT NULL REFERENCES upstream_server_oauth ON DELETE CASCADE,
    issuer       text NOT NULL,
    user_id      uuid REFERENCES users ON DELETE CASCADE,
    -- The issuer's SHA-256 (hex): an issuer is a URL and may hold '|'.
    issuer_hash  text NOT NULL,
    aad_owner    text GENERATED ALWAYS AS (workspace_id::text || '|' || server_id::text || '|' || issuer_hash || '|' ||
                     coalesce(user_id::text, 'workspace')) STORED,
    sealed       bytea NOT NULL,
    key_term     bigint NOT NULL,
    -- When the access token expires (NULL: the server did not say).
    expires_at   timestamptz,
    -- reconnect: a refresh was refused (invalid_grant); only a person
    -- connecting again mends it.
    status       text NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'reconnect')),
    -- version counts the writes of the tokens: a refresh decided on one
    -- version is not repeated by a replica that waited for another's.
    version      bigint NOT NULL DEFAULT 1,
    connected_by uuid REFERENCES users ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX upstream_oauth_grants_owner_idx
    ON upstream_oauth_grants (workspace_id, server_id, issuer, coalesce(user_id, '00000000-0000-0000-0000-000000000000'));
CREATE INDEX upstream_oauth_grants_term_idx ON upstream_oauth_grants (key_term);

-- An authorization request under way: single use, short-lived, bound to
-- the person's dashboard session and the server. Only the state's hash is
-- kept; the PKCE verifier is sealed (not re-sealed on rotation: a state
-- lives ten minutes).
CREATE TABLE upstream_oauth_states (
    state_hash   bytea PRIMARY KEY,
    workspace_id uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
    server_id    uuid NOT NULL REFERENCES upstream_server_oauth ON DELETE CASCADE,
    user_id      uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    session_id   text NOT NULL,
    for_person   boolean NOT NULL,
    issuer       text NOT NULL,
    verifier     bytea NOT NULL,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX upstream_oauth_states_expiry_idx ON upstream_oauth_states (expires_at);

-- +goose Down
DROP TABLE upstream_oauth_states;
DROP TABLE upstream_oauth_grants;
DROP TABLE upstream_oauth_client_secrets;
DROP TABLE upstream_server_oauth;
