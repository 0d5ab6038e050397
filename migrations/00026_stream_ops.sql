-- +goose Up
-- A client's resources/subscribe or unsubscribe (protocols before
-- 2026-07-28) that reached another replica than the one holding its
-- session's standalone stream, where a subscription belongs, on its way
-- there. The replica the request reached writes the row and waits; the
-- replica holding the stream (it knows the binding: an HMAC of workspace,
-- credential, person, server and client session) claims it, carries it out
-- and writes the answer; the first replica takes the answer and deletes the
-- row. A row nobody claimed in a few seconds is withdrawn by its writer.
-- Rows live seconds; one left behind (a replica gone midway) is deleted
-- after five minutes, at the next write. The operation and the answer are
-- sealed by the gateway (AES-GCM under a key derived from its secret).
CREATE TABLE stream_ops (
    id           text PRIMARY KEY,
    seq          bigserial NOT NULL,
    binding      text NOT NULL,
    workspace_id text NOT NULL,
    operation    bytea NOT NULL,
    claimed      boolean NOT NULL DEFAULT false,
    answer       bytea,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX stream_ops_unclaimed_idx ON stream_ops (binding) WHERE NOT claimed;
CREATE INDEX stream_ops_created_idx ON stream_ops (created_at);

-- +goose Down
DROP TABLE stream_ops;
