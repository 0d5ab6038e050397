-- +goose Up
-- A client's answer to a request the gateway relayed to it on a tool call's
-- stream (sampling, elicitation, roots), when the answer's POST reached
-- another replica than the one holding the call. The row lives seconds: the
-- waiting replica, told by a notification (or its poll), reads and deletes
-- it; rows older than five minutes are deleted at each write. id is the
-- SHA-256 of the relay id (the id itself never is stored) and binding an
-- HMAC of the caller it was issued to (workspace, credential, person,
-- server, client session): a row another caller wrote under the same id
-- has another binding, so it can neither be read as the real answer nor
-- stand in its way. The answer is sealed by the gateway (AES-GCM under a
-- key derived from its secret), so the database never holds it readable.
CREATE TABLE relay_answers (
    id           text NOT NULL,
    binding      text NOT NULL,
    workspace_id text NOT NULL,
    answer       bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id, binding)
);
CREATE INDEX relay_answers_created_idx ON relay_answers (created_at);

-- +goose Down
DROP TABLE relay_answers;
