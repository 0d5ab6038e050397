-- +goose Up
-- How long a tool call that needs a person's approval holds open for the
-- decision before it answers with the approval's link (0: not at all). The
-- bound is the gateway's too (MaxApprovalWaitSeconds); here it keeps a
-- value no replica would honour out of the table.
ALTER TABLE workspaces ADD COLUMN approval_wait_seconds int NOT NULL DEFAULT 0
    CHECK (approval_wait_seconds BETWEEN 0 AND 55);

-- +goose Down
ALTER TABLE workspaces DROP COLUMN approval_wait_seconds;
