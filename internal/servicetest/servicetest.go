package servicetest

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
	"github.com/mcpgate/mcpgate/vault"
)

// Env is the services on a fresh, migrated database with its own vault.
type Env struct {
	DB      *store.DB
	Keyring *vault.Keyring
	Service *service.Set
	// Audit records what the services audit, unless opts set another
	// auditor.
	Audit *Recorder
}

// New returns the services built with opts; DB, Keyring and Audit are
// filled in when unset.
func New(tb testing.TB, opts service.Options) *Env {
	tb.Helper()
	e := &Env{DB: opts.DB, Keyring: opts.Keyring, Audit: &Recorder{}}
	if e.DB == nil {
		e.DB = storetest.Open(tb)
	}
	if e.Keyring == nil {
		root := make([]byte, 32)
		_, _ = rand.Read(root)
		k, err := vault.Open(context.Background(), root, e.DB.VaultKeys(), vault.Options{})
		if err != nil {
			tb.Fatalf("vault.Open() err = %v", err)
		}
		e.Keyring = k
	}
	opts.DB, opts.Keyring = e.DB, e.Keyring
	if opts.Audit == nil {
		opts.Audit = e.Audit
	}
	e.Service = service.New(opts)
	return e
}

// NewUser creates a user and returns them with their personal workspace,
// entered as its owner through the API.
func (e *Env) NewUser(tb testing.TB, email string) (*mcpgate.User, *mcpgate.Actor) {
	tb.Helper()
	ctx := context.Background()
	u, err := e.DB.CreateUser(ctx, email, "hash", nil)
	if err != nil {
		tb.Fatalf("CreateUser() err = %v", err)
	}
	wss, err := e.DB.WorkspacesOfUser(ctx, u.ID)
	if err != nil || len(wss) != 1 {
		tb.Fatalf("WorkspacesOfUser() = %v, %v", wss, err)
	}
	a, _, err := e.Service.Workspaces.Enter(ctx, u, wss[0].ID, mcpgate.SourceDashboard)
	if err != nil {
		tb.Fatalf("Enter() err = %v", err)
	}
	return u, a
}

// Recorder is an auditor that keeps every event; SetSaturated makes it
// refuse new calls, as a full audit queue does.
type Recorder struct {
	mu        sync.Mutex
	events    []mcpgate.AuditEvent
	saturated bool
}

// Record keeps ev.
func (r *Recorder) Record(_ context.Context, ev mcpgate.AuditEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

// Saturated implements service.Auditor.
func (r *Recorder) Saturated() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.saturated
}

// SetSaturated sets what Saturated reports.
func (r *Recorder) SetSaturated(v bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.saturated = v
}

// Events returns the events recorded so far.
func (r *Recorder) Events() []mcpgate.AuditEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]mcpgate.AuditEvent(nil), r.events...)
}

// Last returns the last event recorded, or the zero event.
func (r *Recorder) Last() mcpgate.AuditEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) == 0 {
		return mcpgate.AuditEvent{}
	}
	return r.events[len(r.events)-1]
}
