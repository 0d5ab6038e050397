-- +goose Up
-- Health per upstream server, shared by every replica. A server is down
-- (health 'error') from down_since, after a failed discovery or probe or
-- after consecutive calls that failed on the hop; while down its tools are
-- left out of every tool set. next_check_at is when the monitor next
-- probes it (down) or re-discovers it (up): a replica claims a check by
-- moving next_check_at forward in the statement that reads it, so that
-- two replicas never check one server at once. checked_at is when the last
-- check was claimed, which spaces out the checks a server's own
-- notifications/tools/list_changed asks for.
ALTER TABLE upstream_servers
    ADD COLUMN down_since    timestamptz,
    ADD COLUMN next_check_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN checked_at    timestamptz;
UPDATE upstream_servers SET down_since = coalesce(last_discovered_at, now()) WHERE health = 'error';
CREATE INDEX upstream_servers_check_idx ON upstream_servers (next_check_at) WHERE enabled;

-- +goose Down
DROP INDEX upstream_servers_check_idx;
ALTER TABLE upstream_servers DROP COLUMN down_since, DROP COLUMN next_check_at, DROP COLUMN checked_at;
