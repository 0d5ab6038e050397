-- +goose Up
-- Issue 25: an audit event written twice is stored once, and refused calls
-- leave an aggregated row.
--
-- event_id is given by the gateway when it records an event (a random
-- uuid), so the same event carries the same id however often it is
-- written: a spool replayed again after a crash, or a batch retried after
-- its commit was acknowledged too late. The insert skips an event whose
-- (event_id, created_at) is already stored. A unique index on a partitioned
-- table must hold the partition key, and created_at is part of the event,
-- so the pair is as unique as the id. Older rows have no id (NULL), which
-- the partial index leaves out: it starts empty, and costs one scan to build.
ALTER TABLE audit_log ADD COLUMN event_id uuid;
CREATE UNIQUE INDEX audit_log_event_idx ON audit_log (event_id, created_at) WHERE event_id IS NOT NULL;

-- kind 'refused': the calls one credential had refused before they reached
-- a tool (rate limits), counted over a period: one row per credential and
-- period, never one per refused call.
ALTER TABLE audit_log DROP CONSTRAINT audit_log_kind_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_kind_check CHECK (kind IN ('tool_call', 'admin', 'refused'));

-- +goose Down
DELETE FROM audit_log WHERE kind = 'refused';
ALTER TABLE audit_log DROP CONSTRAINT audit_log_kind_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_kind_check CHECK (kind IN ('tool_call', 'admin'));
DROP INDEX audit_log_event_idx;
ALTER TABLE audit_log DROP COLUMN event_id;
