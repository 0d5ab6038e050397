-- The audit log at scale (issue 17).
--
-- audit_log becomes a table partitioned by day on created_at (UTC days), so
-- that retention drops whole partitions (no DELETE, no bloat, no long lock)
-- and every listing, ordered by (created_at, id), reads only the newest
-- partitions it needs. Partitions are named audit_log_pYYYYMMDD and cover
-- [day, day + 1); the store creates them ahead of time and on demand through
-- audit_log_add_partition.
--
-- The existing rows are not copied: the old table is attached as one
-- partition, audit_log_before_YYYYMMDD, covering everything before the end of
-- the day this migration ran, so the migration costs index builds and one
-- validation scan, not a rewrite of the log. Retention deletes from it in small
-- batches (through its created_at index) until it can be dropped whole.
--
-- audit_hourly is the rollup behind the 24-hour charts, kept by the audit
-- writer in the transaction that inserts the rows.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION audit_log_add_partition(day date) RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
    part text := 'audit_log_p' || to_char(day, 'YYYYMMDD');
    lo timestamptz := day::timestamp AT TIME ZONE 'UTC';
BEGIN
    -- Replicas may add the same day at once; the second finds it done.
    PERFORM pg_advisory_xact_lock(hashtext('mcpgate.audit_log.partitions'));
    IF to_regclass(part) IS NOT NULL THEN
        RETURN false;
    END IF;
    BEGIN
        -- CREATE TABLE ... PARTITION OF would take an ACCESS EXCLUSIVE lock on
        -- audit_log and wait behind every running read; ATTACH of an empty
        -- table takes SHARE UPDATE EXCLUSIVE, which reads and inserts ignore.
        EXECUTE format('CREATE TABLE %I (LIKE audit_log INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part);
        EXECUTE format('ALTER TABLE audit_log ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
            part, lo, lo + interval '1 day');
    EXCEPTION WHEN invalid_object_definition THEN
        -- Another partition (the pre-partitioning one) already covers the day.
        RETURN false;
    END;
    RETURN true;
END
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    bound timestamptz;
    legacy text;
BEGIN
    ALTER TABLE audit_log RENAME TO audit_log_old;
    DROP INDEX audit_log_workspace_idx;
    DROP INDEX audit_log_actor_idx;
    -- The JSON API has no authentication but the dashboard session: the
    -- admin actions it recorded as "api" were made in the dashboard.
    UPDATE audit_log_old SET source = 'dashboard' WHERE source = 'api';
    SELECT date_trunc('day', greatest(now(), max(created_at)), 'UTC') + interval '1 day' INTO bound FROM audit_log_old;

    CREATE TABLE audit_log (
        id              bigint NOT NULL DEFAULT nextval('audit_log_id_seq'),
        workspace_id    uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
        actor_id        uuid REFERENCES users ON DELETE SET NULL,
        key_id          text,
        kind            text NOT NULL CONSTRAINT audit_log_kind_check CHECK (kind IN ('tool_call', 'admin')),
        action          text NOT NULL,
        arguments       jsonb,
        outcome         text NOT NULL,
        message         text NOT NULL DEFAULT '',
        upstream_status int,
        duration_ms     double precision NOT NULL DEFAULT 0,
        source          text NOT NULL DEFAULT '',
        created_at      timestamptz NOT NULL DEFAULT now()
    ) PARTITION BY RANGE (created_at);
    -- No primary key: on a partitioned table it would have to include
    -- created_at, the sequence already makes ids unique, and nothing looks a
    -- row up by id. The old table's own key stays on its partition.
    ALTER SEQUENCE audit_log_id_seq OWNED BY audit_log.id;

    -- One index per filter of the API and the dashboard, each ending in the
    -- listing's order, so a page is an index range read that stops after
    -- LIMIT rows whatever the table's size. Outcomes other than ok and admin
    -- actions are rare: partial indexes serve them at a fraction of the size.
    CREATE INDEX audit_log_ws_time_idx ON audit_log (workspace_id, created_at DESC, id DESC);
    CREATE INDEX audit_log_ws_actor_idx ON audit_log (workspace_id, actor_id, created_at DESC, id DESC);
    CREATE INDEX audit_log_ws_action_idx ON audit_log (workspace_id, action, created_at DESC, id DESC);
    CREATE INDEX audit_log_ws_source_idx ON audit_log (workspace_id, source, created_at DESC, id DESC);
    -- A member's default view is their own AI calls: without this, a member
    -- who works in the dashboard would have every one of their rows read to
    -- find none.
    CREATE INDEX audit_log_ws_actor_source_idx ON audit_log (workspace_id, actor_id, source, created_at DESC, id DESC);
    CREATE INDEX audit_log_ws_outcome_idx ON audit_log (workspace_id, outcome, created_at DESC, id DESC)
        WHERE outcome <> 'ok';
    CREATE INDEX audit_log_ws_admin_idx ON audit_log (workspace_id, created_at DESC, id DESC) WHERE kind = 'admin';

    legacy := 'audit_log_before_' || to_char(bound AT TIME ZONE 'UTC', 'YYYYMMDD');
    EXECUTE format('ALTER TABLE audit_log_old RENAME TO %I', legacy);
    EXECUTE format('CREATE INDEX %I ON %I (created_at)', legacy || '_created_idx', legacy);
    EXECUTE format('ALTER TABLE audit_log ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%L)', legacy, bound);
    FOR i IN 0..7 LOOP
        PERFORM audit_log_add_partition(((bound AT TIME ZONE 'UTC')::date + i));
    END LOOP;
END $$;
-- +goose StatementEnd

-- Calls and failed calls (outcome other than ok) per workspace, UTC hour,
-- actor and source. actor_id is the nil uuid for calls without a user, so
-- that the key needs no NULLS NOT DISTINCT (PostgreSQL 15+). No foreign key to
-- users: a deleted user's counts still belong to the workspace's totals.
CREATE TABLE audit_hourly (
    workspace_id uuid NOT NULL REFERENCES workspaces ON DELETE CASCADE,
    hour         timestamptz NOT NULL,
    actor_id     uuid NOT NULL,
    source       text NOT NULL,
    calls        bigint NOT NULL,
    errors       bigint NOT NULL,
    PRIMARY KEY (workspace_id, hour, actor_id, source)
);
CREATE INDEX audit_hourly_actor_idx ON audit_hourly (workspace_id, actor_id, hour);
CREATE INDEX audit_hourly_hour_idx ON audit_hourly (hour);

INSERT INTO audit_hourly (workspace_id, hour, actor_id, source, calls, errors)
SELECT workspace_id, date_trunc('hour', created_at, 'UTC'), coalesce(actor_id, '00000000-0000-0000-0000-000000000000'),
    source, count(*), count(*) FILTER (WHERE outcome <> 'ok')
FROM audit_log WHERE kind = 'tool_call'
GROUP BY 1, 2, 3, 4;

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    ALTER SEQUENCE audit_log_id_seq OWNED BY NONE;
    CREATE TABLE audit_log_flat (
        id              bigint NOT NULL DEFAULT nextval('audit_log_id_seq'),
        workspace_id    uuid NOT NULL,
        actor_id        uuid,
        key_id          text,
        kind            text NOT NULL,
        action          text NOT NULL,
        arguments       jsonb,
        outcome         text NOT NULL,
        message         text NOT NULL DEFAULT '',
        upstream_status int,
        duration_ms     double precision NOT NULL DEFAULT 0,
        source          text NOT NULL DEFAULT '',
        created_at      timestamptz NOT NULL DEFAULT now()
    );
    INSERT INTO audit_log_flat SELECT * FROM audit_log;
    -- Before 00002 every admin action was recorded with source "api".
    UPDATE audit_log_flat SET source = 'api' WHERE kind = 'admin' AND source = 'dashboard';
    DROP TABLE audit_log;
    ALTER TABLE audit_log_flat RENAME TO audit_log;
    ALTER TABLE audit_log ADD CONSTRAINT audit_log_pkey PRIMARY KEY (id),
        ADD CONSTRAINT audit_log_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces ON DELETE CASCADE,
        ADD CONSTRAINT audit_log_actor_id_fkey FOREIGN KEY (actor_id) REFERENCES users ON DELETE SET NULL,
        ADD CONSTRAINT audit_log_kind_check CHECK (kind IN ('tool_call', 'admin'));
    ALTER SEQUENCE audit_log_id_seq OWNED BY audit_log.id;
    CREATE INDEX audit_log_workspace_idx ON audit_log (workspace_id, id DESC);
    CREATE INDEX audit_log_actor_idx ON audit_log (workspace_id, actor_id, id DESC);
END $$;
-- +goose StatementEnd
DROP TABLE audit_hourly;
DROP FUNCTION audit_log_add_partition(date);
