package service

import (
	"context"

	"github.com/mcpgate/mcpgate/internal/password"
)

// hashPassword hashes a new password.
func (s *Service) hashPassword(_ context.Context, pw string) (string, error) {
	return password.Hash(pw, s.pwParams)
}

// verifyPassword checks a password against its stored hash.
func (s *Service) verifyPassword(_ context.Context, pw, hash string) error {
	return password.Verify(pw, hash)
}
