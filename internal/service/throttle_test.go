package service_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/password"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
)

var fastParams = &password.Params{Time: 1, Memory: 1024, Threads: 1}

const goodPassword = "correct horse battery staple"

// TestLogin_NoLockoutSwitch: failures from one address
// refuse that address, not the account's owner elsewhere; a guess spread
// over many addresses hits the per-email ceiling, past which only addresses
// that have not been failing may try, and the right password still gets in.
func TestLogin_NoLockoutSwitch(t *testing.T) {
	ctx := context.Background()
	env := servicetest.New(t, service.Options{PasswordParams: fastParams})
	if _, err := env.Service.Accounts.Signup(ctx, "victim@example.com", goodPassword, "", "192.0.2.1"); err != nil {
		t.Fatalf("Signup() err = %v", err)
	}
	login := func(pw, addr string) mcpgate.Code {
		_, err := env.Service.Accounts.Login(ctx, mcpgate.Credentials{Email: "victim@example.com", Password: pw}, addr)
		return codeOf(err)
	}
	for i := range 5 {
		if c := login("wrong "+strconv.Itoa(i), "198.51.100.1"); c != mcpgate.EUnauthorized {
			t.Fatalf("failure %d: code = %q, want unauthorized", i+1, c)
		}
	}
	if c := login(goodPassword, "198.51.100.1"); c != mcpgate.ETooMany {
		t.Errorf("6th try from the guessing address: code = %q, want too_many", c)
	}
	if c := login(goodPassword, "203.0.113.5"); c != "" {
		t.Errorf("owner from another address after 5 failures elsewhere: code = %q, want ok", c)
	}
	// IPv6 addresses of one /64 are one address.
	for i := range 5 {
		login("wrong", "2001:db8:1:2::"+strconv.Itoa(i+1))
	}
	if c := login(goodPassword, "2001:db8:1:2::ff"); c != mcpgate.ETooMany {
		t.Errorf("another address of the guessing /64: code = %q, want too_many", c)
	}
	// A distributed guess: 100 failures from 100 addresses.
	for i := range 100 {
		if c := login("wrong", "10.0."+strconv.Itoa(i/250)+"."+strconv.Itoa(i%250+1)); c != mcpgate.EUnauthorized {
			t.Fatalf("distributed failure %d: code = %q, want unauthorized", i+1, c)
		}
	}
	if c := login(goodPassword, "10.0.0.1"); c != mcpgate.ETooMany {
		t.Errorf("past the email ceiling, from an address that failed: code = %q, want too_many", c)
	}
	if c := login("wrong", "10.9.9.9"); c != mcpgate.EUnauthorized {
		t.Errorf("past the ceiling, fresh address, wrong password: code = %q, want unauthorized", c)
	}
	if c := login("wrong", "10.9.9.9"); c != mcpgate.ETooMany {
		t.Errorf("past the ceiling, that address again: code = %q, want too_many (one try per fresh address)", c)
	}
	if c := login(goodPassword, "203.0.113.77"); c != "" {
		t.Errorf("past the ceiling, owner from a clean address: code = %q, want ok", c)
	}
}

// TestDummyHash: the constant hash verified for unknown emails uses the
// default parameters, so an unknown email costs what a known one does.
func TestDummyHash(t *testing.T) {
	if err := password.Verify("dummy password for timing", service.DummyHash); err != nil {
		t.Fatalf("Verify(dummy) err = %v", err)
	}
	want := fmt.Sprintf("$m=%d,t=%d,p=%d$", password.Default.Memory, password.Default.Time, password.Default.Threads)
	if !strings.Contains(service.DummyHash, want) {
		t.Errorf("dummy hash %q does not use password.Default (%s)", service.DummyHash, want)
	}
}

// TestSignup_ThrottledPerAddress: sign-ups are limited
// per client address, also when they arrive all at once.
func TestSignup_ThrottledPerAddress(t *testing.T) {
	ctx := context.Background()
	env := servicetest.New(t, service.Options{PasswordParams: fastParams})
	var ok, limited atomic.Int32
	var wg sync.WaitGroup
	for i := range 15 {
		wg.Go(func() {
			_, err := env.Service.Accounts.Signup(ctx, fmt.Sprintf("u%d@example.com", i), goodPassword, "", "198.51.100.7")
			switch codeOf(err) {
			case "":
				ok.Add(1)
			case mcpgate.ETooMany:
				limited.Add(1)
				if mcpgate.ErrorRetryAfter(err) < 1 {
					t.Errorf("sign-up refusal without Retry-After")
				}
			default:
				t.Errorf("Signup() err = %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 10 || limited.Load() != 5 {
		t.Errorf("15 parallel sign-ups from one address: %d created, %d refused; want 10 and 5", ok.Load(), limited.Load())
	}
	if _, err := env.Service.Accounts.Signup(ctx, "other@example.com", goodPassword, "", "203.0.113.1"); err != nil {
		t.Errorf("sign-up from another address: err = %v, want nil", err)
	}
}
