package password_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/password"
)

var cheap = password.Params{Time: 1, Memory: 1024, Threads: 1}

func TestHashVerify(t *testing.T) {
	h, err := password.Hash("correct horse battery", cheap)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(h, "correct horse") {
		t.Fatalf("Hash() = %q contains the password", h)
	}
	h2, _ := password.Hash("correct horse battery", cheap)
	if h == h2 {
		t.Fatal("two hashes of one password are equal: salt not random")
	}
	tests := []struct {
		name, password, hash string
		wantErr              error
	}{
		{name: "right", password: "correct horse battery", hash: h},
		{name: "wrong", password: "correct horse batterY", hash: h, wantErr: password.ErrMismatch},
		{name: "garbage", password: "x", hash: "$argon2id$garbage", wantErr: password.ErrMismatch},
		{name: "other algorithm", password: "x", hash: "$2a$10$abcdefghijklmnopqrstuv", wantErr: password.ErrMismatch},
		{name: "absurd cost", password: "x", hash: "$argon2id$v=19$m=99999999,t=1,p=1$c2FsdA$a2V5", wantErr: password.ErrMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := password.Verify(tt.password, tt.hash); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Verify() err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}
