-- +goose Up
-- What an upstream server may ask of the person's client during a tool
-- call, relayed by the gateway (#30). Sampling (the client runs a model
-- prompt) and roots (the client's folders) are off until an admin turns
-- them on; both are deprecated in the 2026-07-28 protocol. Elicitation in
-- form mode is always relayed; in URL mode it sends the person to a web
-- page, and only to a host of elicitation_url_hosts: a lower-case name or
-- IP literal with an optional port and an optional leading "*." for
-- subdomains (checked by mcpgate.NormalizeElicitationHosts; the CHECK
-- bounds what any writer can store).
ALTER TABLE upstream_servers
    ADD COLUMN allow_sampling boolean NOT NULL DEFAULT false,
    ADD COLUMN allow_roots boolean NOT NULL DEFAULT false,
    ADD COLUMN elicitation_url_hosts text[] NOT NULL DEFAULT '{}'
        CHECK (cardinality(elicitation_url_hosts) <= 50);

-- The hosts a server's URL-mode elicitations named, allowed or not, so
-- that an admin sees what a server asks for and can allow it. Bounded per
-- server: the store keeps the 100 most recently seen
-- (mcpgate.MaxElicitationHostsSeen), deleting the least recently seen
-- when a new host arrives, under a lock per server.
CREATE TABLE upstream_elicitation_hosts (
    workspace_id uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
    server_id    uuid NOT NULL REFERENCES upstream_servers ON DELETE CASCADE,
    host         text NOT NULL CHECK (host <> '' AND length(host) <= 261),
    first_seen   timestamptz NOT NULL DEFAULT now(),
    last_seen    timestamptz NOT NULL DEFAULT now(),
    times        bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (workspace_id, server_id, host)
);

-- +goose Down
DROP TABLE upstream_elicitation_hosts;
ALTER TABLE upstream_servers
    DROP COLUMN elicitation_url_hosts,
    DROP COLUMN allow_roots,
    DROP COLUMN allow_sampling;
