-- +goose Up
-- A client an admin registered at the authorization server by hand (its
-- id, and its secret in upstream_oauth_client_secrets), for servers that
-- take neither Dynamic Client Registration nor client ID metadata
-- documents.
ALTER TABLE upstream_server_oauth DROP CONSTRAINT upstream_server_oauth_registration_check;
ALTER TABLE upstream_server_oauth ADD CONSTRAINT upstream_server_oauth_registration_check
    CHECK (registration IN ('cimd', 'dcr', 'manual'));

-- +goose Down
DELETE FROM upstream_server_oauth WHERE registration = 'manual';
ALTER TABLE upstream_server_oauth DROP CONSTRAINT upstream_server_oauth_registration_check;
ALTER TABLE upstream_server_oauth ADD CONSTRAINT upstream_server_oauth_registration_check
    CHECK (registration IN ('cimd', 'dcr'));
