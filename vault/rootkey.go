package vault

import (
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// The check value is a fixed plaintext wrapped under the root key. Opening it
// proves the root key is the one that wrapped the data keys, before any of them
// is touched.
var (
	checkPlaintext = []byte("mcpgate vault root key check v1")
	checkAAD       = []byte("vault-check|v1")
)

// ParseRootKey decodes a root key from base64 (standard or URL alphabet,
// padded or not; surrounding white space, such as a file's trailing newline,
// is ignored). It must decode to exactly 32 bytes that are not all the same
// byte. Errors wrap ErrInvalidRootKey and never contain the input.
func ParseRootKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidRootKey)
	}
	for _, enc := range []*base64.Encoding{
		base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding,
	} {
		key, err := enc.DecodeString(s)
		if err != nil {
			continue
		}
		if len(key) != KeySize {
			clear(key)
			return nil, fmt.Errorf("%w: decodes to %d bytes", ErrInvalidRootKey, len(key))
		}
		if allSame(key) {
			clear(key)
			return nil, fmt.Errorf("%w: not random", ErrInvalidRootKey)
		}
		return key, nil
	}
	return nil, fmt.Errorf("%w: not base64", ErrInvalidRootKey)
}

// GenerateRootKey returns a new random root key, base64-encoded (standard
// alphabet, padded), as ParseRootKey reads it.
func GenerateRootKey() string {
	key := make([]byte, KeySize)
	rand.Read(key)
	s := base64.StdEncoding.EncodeToString(key)
	clear(key)
	return s
}

func allSame(b []byte) bool {
	for _, c := range b[1:] {
		if c != b[0] {
			return false
		}
	}
	return true
}

// newRoot checks and loads a root key. The caller keeps its slice.
func newRoot(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("%w: %d bytes", ErrInvalidRootKey, len(key))
	}
	return newAEAD(key)
}

// newCheck returns a fresh check value for root.
func newCheck(root cipher.AEAD) []byte { return wrap(root, checkPlaintext, checkAAD) }

// verifyCheck reports whether root opens the stored check value.
func verifyCheck(root cipher.AEAD, check []byte) error {
	if len(check) == 0 {
		return errors.New("vault: the key store holds data keys but no check value")
	}
	pt, err := unwrap(root, check, checkAAD)
	if errors.Is(err, ErrMalformed) {
		return fmt.Errorf("vault: stored check value: %w", err)
	}
	if err != nil || subtle.ConstantTimeCompare(pt, checkPlaintext) != 1 {
		return ErrWrongRootKey
	}
	return nil
}
