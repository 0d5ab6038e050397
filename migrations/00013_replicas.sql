-- +goose Up
-- The gateway replicas that are serving, so that each can enforce its share
-- of the tool-call limits (a key's rate divided by the live replicas). Each
-- replica writes its row every few seconds; a row not written for a while
-- is a replica that is gone (killed without a clean stop). Nothing else reads
-- or writes this table, and losing it loses nothing: the rows come back
-- with the next heartbeats.
CREATE TABLE replicas (
    id         uuid PRIMARY KEY,
    started_at timestamptz NOT NULL DEFAULT now(),
    seen_at    timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE replicas;
