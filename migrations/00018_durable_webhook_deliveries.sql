-- +goose Up
-- Webhook deliveries survive a stop or a crash: the row holds what is sent
-- (the target URL and the body, never the secret, which stays sealed in
-- webhook_secrets, nor a signature) and when the next attempt is due. A
-- replica claims a due delivery by setting claimed_by and claim_until in one
-- statement (FOR UPDATE SKIP LOCKED), so two replicas never send the same
-- attempt, and a claim whose replica died expires for another to take.
-- A final outcome clears url and body (a Slack webhook's URL is its key).
-- Rows from before this migration had no body: they cannot be sent again.
ALTER TABLE webhook_deliveries
    ADD COLUMN url             text NOT NULL DEFAULT '',
    ADD COLUMN body            bytea NOT NULL DEFAULT '',
    ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN claimed_by      text,
    ADD COLUMN claim_until     timestamptz;
UPDATE webhook_deliveries SET state = 'failed', last_error = 'the gateway stopped before this delivery went out'
    WHERE state = 'pending';
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';

-- +goose Down
DROP INDEX webhook_deliveries_due_idx;
ALTER TABLE webhook_deliveries DROP COLUMN url, DROP COLUMN body, DROP COLUMN next_attempt_at,
    DROP COLUMN claimed_by, DROP COLUMN claim_until;
