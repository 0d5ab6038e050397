// Package password hashes and verifies dashboard passwords with argon2id,
// stored in the PHC string format so that parameters can be raised later
// without breaking old hashes. Every hash and check runs within one memory
// budget per process (DefaultLimiter). It imports only the standard library
// and golang.org/x.
//
// Imports from this module: none.
package password

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Params are argon2id's cost parameters.
type Params struct {
	Time    uint32
	Memory  uint32 // KiB
	Threads uint8
}

// Default follows RFC 9106's second recommended option (64 MiB, 3 passes),
// scaled to 2 lanes for small machines.
var Default = Params{Time: 3, Memory: 64 * 1024, Threads: 2}

// ErrMismatch is returned for a wrong password or an unreadable hash.
var ErrMismatch = errors.New("password does not match")

var b64 = base64.RawStdEncoding

// Hash returns the PHC string of password under p with a random salt,
// within DefaultLimiter's memory budget (ErrBusy when it cannot start in
// time).
func Hash(password string, p Params) (string, error) {
	return HashContext(context.Background(), password, p)
}

// HashContext is Hash, giving up its wait for the budget when ctx ends.
func HashContext(ctx context.Context, password string, p Params) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("read salt: %w", err)
	}
	var key []byte
	if err := DefaultLimiter.do(ctx, p.Memory, func() {
		key = argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, 32)
	}); err != nil {
		return "", err
	}
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.Memory, p.Time, p.Threads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// Verify checks password against a PHC string from Hash in constant time,
// within DefaultLimiter's memory budget: ErrMismatch for a wrong password
// or unreadable hash, ErrBusy when the check could not start in time.
func Verify(password, encoded string) error {
	return VerifyContext(context.Background(), password, encoded)
}

// VerifyContext is Verify, giving up its wait for the budget when ctx ends.
func VerifyContext(ctx context.Context, password, encoded string) error {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return ErrMismatch
	}
	var version int
	var p Params
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return ErrMismatch
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.Memory, &p.Time, &p.Threads); err != nil ||
		p.Time == 0 || p.Threads == 0 || p.Memory > 1<<22 || p.Time > 64 {
		return ErrMismatch
	}
	salt, err1 := b64.DecodeString(parts[4])
	want, err2 := b64.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) == 0 {
		return ErrMismatch
	}
	var got []byte
	if err := DefaultLimiter.do(ctx, p.Memory, func() {
		got = argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, uint32(len(want)))
	}); err != nil {
		return err
	}
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return ErrMismatch
	}
	return nil
}
