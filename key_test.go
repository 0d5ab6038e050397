package mcpgate_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
)

func TestParseMCPKey(t *testing.T) {
	key, id, hash := mcpgate.NewMCPKey()
	tests := []struct {
		name, key string
		ok        bool
	}{
		{name: "fresh key", key: key, ok: true},
		{name: "empty", key: ""},
		{name: "prefix only", key: "mcpg_"},
		{name: "one short", key: key[:len(key)-1]},
		{name: "one long", key: key + "a"},
		{name: "wrong prefix", key: "mcpx_" + key[5:]},
		{name: "upper-case prefix", key: "MCPG_" + key[5:]},
		{name: "no separator", key: key[:17] + "-" + key[18:]},
		{name: "id outside the alphabet", key: "mcpg_" + "l" + key[6:]},
		{name: "secret with a slash", key: key[:len(key)-1] + "/"},
		{name: "secret with padding", key: key[:len(key)-1] + "="},
		{name: "path traversal", key: "mcpg_" + strings.Repeat("../", 20)[:56]},
		{name: "multi-byte rune", key: key[:len(key)-2] + "é"},
		{name: "NUL", key: key[:len(key)-1] + "\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotID, secret, ok := mcpgate.ParseMCPKey(tt.key)
			if ok != tt.ok {
				t.Fatalf("ParseMCPKey(%q) ok = %v, want %v", tt.key, ok, tt.ok)
			}
			if ok && (gotID != id || !bytes.Equal(mcpgate.HashMCPKeySecret(secret), hash)) {
				t.Errorf("ParseMCPKey() = %q, %q; want id %q and the secret of the hash", gotID, secret, id)
			}
			if !ok && (gotID != "" || secret != "") {
				t.Errorf("ParseMCPKey(%q) returned parts %q, %q with ok false", tt.key, gotID, secret)
			}
		})
	}
}

// FuzzParseMCPKey: no input panics, and whatever is accepted has exactly the
// key's shape, so the id can go into a query and the secret into the hash.
func FuzzParseMCPKey(f *testing.F) {
	for range 3 {
		k, _, _ := mcpgate.NewMCPKey()
		f.Add(k)
	}
	f.Add("")
	f.Add("mcpg_")
	f.Add("mcpg_abcdefghijkm_" + strings.Repeat("A", 43))
	f.Add("mcpg_abcdefghijkm/" + strings.Repeat("A", 43))
	f.Add("mcpg_%2e%2e%2fabcdefgh_" + strings.Repeat("A", 38))
	f.Fuzz(func(t *testing.T, key string) {
		id, secret, ok := mcpgate.ParseMCPKey(key)
		if !ok {
			return
		}
		if len(key) != mcpgate.MCPKeyLen || key != "mcpg_"+id+"_"+secret || len(id) != 12 || len(secret) != 43 {
			t.Fatalf("ParseMCPKey(%q) accepted id %q secret %q", key, id, secret)
		}
		for _, c := range id + secret {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				t.Fatalf("ParseMCPKey(%q) accepted %q", key, c)
			}
		}
	})
}
