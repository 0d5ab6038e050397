package vault

import (
	"crypto/sha256"
	"encoding/hex"
)

// UpstreamGrantOwner is the owner part of an upstream OAuth grant's
// additional data: workspace, server, the issuer's SHA-256 (an issuer is a
// URL and may hold '|') and the person ("workspace" for the workspace's
// grant). The store computes the same string in SQL (aad_owner), so that
// the re-seal job binds what the service bound.
func UpstreamGrantOwner(workspaceID, serverID, issuer, userID string) string {
	if userID == "" {
		userID = "workspace"
	}
	return workspaceID + "|" + serverID + "|" + IssuerHash(issuer) + "|" + userID
}

// IssuerHash is the hex SHA-256 of an issuer, as UpstreamGrantOwner binds it.
func IssuerHash(issuer string) string {
	sum := sha256.Sum256([]byte(issuer))
	return hex.EncodeToString(sum[:])
}

// UpstreamGrantAAD binds an upstream OAuth grant's sealed tokens to its
// row and owner: "upstream-oauth|v1|" + owner + "|" + grantID. A grant
// copied to another workspace, server, issuer or person fails to open.
func UpstreamGrantAAD(owner, grantID string) []byte {
	return rowAAD("upstream-oauth|v1|", owner, grantID)
}

// UpstreamClientSecretAAD binds the client secret the gateway was given by
// an upstream's Dynamic Client Registration to the workspace and server.
func UpstreamClientSecretAAD(workspaceID, serverID string) []byte {
	return rowAAD("upstream-oauth-client|v1|", workspaceID, serverID)
}

// UpstreamStateAAD binds the PKCE verifier of an authorization request
// under way to the workspace and the state's hash (hex).
func UpstreamStateAAD(workspaceID, stateHash string) []byte {
	return rowAAD("upstream-oauth-state|v1|", workspaceID, stateHash)
}
