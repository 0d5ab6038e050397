-- +goose Up
-- Remote MCP servers a workspace adds as connectors of its own.
CREATE TABLE upstream_servers (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id       uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
    name               text NOT NULL,
    url                text NOT NULL,
    -- The credential headers' names and value hints, in order: what the API
    -- shows. The values are sealed in upstream_server_headers.
    header_hints       jsonb NOT NULL DEFAULT '[]',
    enabled            boolean NOT NULL DEFAULT true,
    health             text NOT NULL DEFAULT 'ok' CHECK (health IN ('ok', 'error')),
    last_error         text NOT NULL DEFAULT '',
    last_discovered_at timestamptz,
    protocol_version   text NOT NULL DEFAULT '',
    -- The initialize (or server/discover) result and the prompts, resources
    -- and resource templates, as the server gave them at the last discovery.
    init               jsonb,
    prompts            jsonb NOT NULL DEFAULT '[]',
    resources          jsonb NOT NULL DEFAULT '[]',
    resource_templates jsonb NOT NULL DEFAULT '[]',
    created_by         uuid REFERENCES users ON DELETE SET NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (workspace_id, name)
);

-- A server's credential headers as one sealed JSON object, bound (AAD) to
-- the workspace and the server's id like an E2B key. No row: no headers.
CREATE TABLE upstream_server_headers (
    id           uuid PRIMARY KEY REFERENCES upstream_servers ON DELETE CASCADE,
    workspace_id uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
    sealed       bytea NOT NULL,
    key_term     bigint NOT NULL
);
CREATE INDEX upstream_server_headers_term_idx ON upstream_server_headers (key_term);

-- Each server's tools: the routing table of the workspace endpoint
-- (exposed_name -> server, name) and each tool's policy and trust.
CREATE TABLE upstream_tools (
    workspace_id    uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
    server_id       uuid NOT NULL REFERENCES upstream_servers ON DELETE CASCADE,
    name            text NOT NULL,
    -- The definition in force, as the server gave it (while quarantined:
    -- the one pinned), and a quarantined tool's changed definition.
    definition      jsonb NOT NULL,
    pending         jsonb,
    exposed_name    text,
    alias           text NOT NULL DEFAULT '',
    name_problem    text NOT NULL DEFAULT '',
    enabled         boolean NOT NULL DEFAULT false,
    approval        text NOT NULL DEFAULT 'none' CHECK (approval IN ('none', 'model', 'human')),
    -- The pin ("v1:<sha256>") of the definition an admin trusted; NULL
    -- while nobody has.
    pin             text,
    quarantined     boolean NOT NULL DEFAULT false,
    listed          boolean NOT NULL DEFAULT true,
    -- The hints as declared: NULL is "not declared", apart from false.
    read_only_hint   boolean,
    destructive_hint boolean,
    idempotent_hint  boolean,
    open_world_hint  boolean,
    updated_by      uuid REFERENCES users ON DELETE SET NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (server_id, name),
    CHECK (NOT quarantined OR (pending IS NOT NULL AND pin IS NOT NULL))
);
-- Exposed names are unique in a workspace, ignoring case (some clients
-- fold it); the lookup of a call's route leads with the workspace.
CREATE UNIQUE INDEX upstream_tools_exposed_idx ON upstream_tools (workspace_id, lower(exposed_name));
CREATE INDEX upstream_tools_workspace_idx ON upstream_tools (workspace_id, server_id);

-- +goose Down
DROP TABLE upstream_tools;
DROP TABLE upstream_server_headers;
DROP TABLE upstream_servers;
