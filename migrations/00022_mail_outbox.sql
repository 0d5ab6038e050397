-- +goose Up
-- Approval mails wait here until the mail server took them, so that a stop
-- or a crash loses none; every replica's mailer claims the due ones as the
-- webhook sender claims its deliveries (claimed_by and claim_until set in
-- one statement, FOR UPDATE SKIP LOCKED; an expired claim is taken over).
-- A row is deleted once its last attempt is made: the audit log keeps the
-- outcome. Mails that carry a credential (sign-in, reset and verification
-- links) never come here: they are sent from memory, and a lost one is
-- asked for again.
CREATE TABLE mail_outbox (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    kind            text NOT NULL,
    ref             text NOT NULL DEFAULT '',
    recipient       text NOT NULL,
    subject         text NOT NULL,
    body_text       text NOT NULL,
    body_html       text NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    last_error      text NOT NULL DEFAULT '',
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    claimed_by      text,
    claim_until     timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX mail_outbox_due_idx ON mail_outbox (next_attempt_at);

-- +goose Down
DROP TABLE mail_outbox;
