package mcpgate

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// MCP key format: "mcpg_" + a 12-character public id + "_" + 43 characters
// of base64url secret (32 random bytes). The id finds the row; only the
// SHA-256 of the secret is stored, and it is compared in constant time.
const (
	mcpKeyPrefix    = "mcpg_"
	mcpKeyIDLen     = 12
	mcpKeySecretLen = 43
	// MCPKeyLen is the length of a well-formed key.
	MCPKeyLen = len(mcpKeyPrefix) + mcpKeyIDLen + 1 + mcpKeySecretLen
)

const idAlphabet = "abcdefghijkmnopqrstuvwxyz23456789" // no l, 0, 1: readable in a list

// NewMCPKey returns a new key, its public id and the hash of its secret.
func NewMCPKey() (key, id string, secretHash []byte) {
	idBytes := make([]byte, mcpKeyIDLen)
	_, _ = rand.Read(idBytes)
	for i, b := range idBytes {
		idBytes[i] = idAlphabet[int(b)%len(idAlphabet)]
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	s := base64.RawURLEncoding.EncodeToString(secret)
	id = string(idBytes)
	return mcpKeyPrefix + id + "_" + s, id, HashMCPKeySecret(s)
}

// ParseMCPKey splits a key into its public id and secret. It checks only the
// shape, never the database.
func ParseMCPKey(key string) (id, secret string, ok bool) {
	if len(key) != MCPKeyLen || !strings.HasPrefix(key, mcpKeyPrefix) {
		return "", "", false
	}
	rest := key[len(mcpKeyPrefix):]
	id, secret = rest[:mcpKeyIDLen], rest[mcpKeyIDLen+1:]
	if rest[mcpKeyIDLen] != '_' {
		return "", "", false
	}
	for i := 0; i < len(id); i++ {
		if strings.IndexByte(idAlphabet, id[i]) < 0 {
			return "", "", false
		}
	}
	for i := 0; i < len(secret); i++ {
		c := secret[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return "", "", false
		}
	}
	return id, secret, true
}

// HashMCPKeySecret is the stored form of a key's secret part.
func HashMCPKeySecret(secret string) []byte { return HashToken(secret) }

// HashToken is the stored form of a random bearer token (an invitation, a
// key's secret): its SHA-256. The tokens carry 256 random bits, so a plain
// hash is as good as a slow one and lets the row be found by it.
func HashToken(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}
