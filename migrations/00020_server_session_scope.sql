-- +goose Up
-- How the gateway scopes its sessions with a server: 'person' (one set of
-- sessions per workspace, server and person, each carrying one call at a
-- time) or 'client' (besides, per session of the client on the server's
-- own endpoint, for servers that keep state per session).
ALTER TABLE upstream_servers
    ADD COLUMN session_scope text NOT NULL DEFAULT 'person' CHECK (session_scope IN ('person', 'client'));

-- +goose Down
ALTER TABLE upstream_servers DROP COLUMN session_scope;
