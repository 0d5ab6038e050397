package password_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestLimiter: hashes beyond the memory budget wait, and
// give up with ErrBusy rather than run.
func TestLimiter(t *testing.T) {
	l := password.NewLimiter(2048, 50*time.Millisecond) // two cheap hashes
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			_ = password.LimiterDo(l, context.Background(), cheap.Memory, func() { started <- struct{}{}; <-release })
		})
	}
	<-started
	<-started
	ran := false
	if err := password.LimiterDo(l, context.Background(), cheap.Memory, func() { ran = true }); !errors.Is(err, password.ErrBusy) || ran {
		t.Errorf("third hash over the budget: err = %v, ran = %v; want ErrBusy and not run", err, ran)
	}
	close(release)
	wg.Wait()
	if err := password.LimiterDo(l, context.Background(), cheap.Memory, func() { ran = true }); err != nil || !ran {
		t.Errorf("hash after the others finished: err = %v, ran = %v", err, ran)
	}
	if password.DefaultLimiter.Budget() < 2*int64(password.Default.Memory)<<10 {
		t.Errorf("default budget %d bytes holds fewer than two default hashes", password.DefaultLimiter.Budget())
	}
}
