-- +goose Up
-- The boolean that approval replaced (00003) is no longer written or read:
-- approval alone is a tool's policy. Nothing reads the column since 00003;
-- a replica of the previous release still writes it, so during a rolling
-- upgrade its tool-setting writes fail (nothing weaker is stored, calls and
-- reads are unaffected) until it is replaced.
ALTER TABLE tool_policies DROP COLUMN needs_confirmation;

-- +goose Down
ALTER TABLE tool_policies ADD COLUMN needs_confirmation boolean NOT NULL DEFAULT false;
UPDATE tool_policies SET needs_confirmation = approval <> 'none';
