package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
	"github.com/mcpgate/mcpgate/internal/store"
)

// svcFixture is the services on a fresh database with one workspace: its
// owner, an admin and a plain member, and a test connector.
type svcFixture struct {
	db      *store.DB
	sealer  store.Sealer
	svc     *service.Set
	audit   *servicetest.Recorder
	conn    *noteConnector
	ws      string
	owner   *mcpgate.Actor
	admin   *mcpgate.Actor
	member  *mcpgate.Actor
	outside *mcpgate.Actor // owner of another workspace
}

// noteConnector is a connector that exists only in tests: nothing outside
// its own tests names it or its tools. It keeps notes.
type noteConnector struct {
	mu    sync.Mutex
	notes []string
	tools []*connectors.Tool
}

type noteIn struct {
	Text string `json:"text" jsonschema:"the note"`
}

func newNoteConnector() *noteConnector {
	c := &noteConnector{}
	c.tools = []*connectors.Tool{
		connectors.NewTool(connectors.Spec{Name: "notes_list", Title: "List notes", Description: "Lists the notes.",
			Annotations: connectors.Annotations{ReadOnly: true, Idempotent: true}, DefaultEnabled: true},
			func(context.Context, mcpgate.Secret, struct{}) (map[string]any, error) {
				c.mu.Lock()
				defer c.mu.Unlock()
				return map[string]any{"notes": append([]string{}, c.notes...)}, nil
			}),
		connectors.NewTool(connectors.Spec{Name: "notes_add", Title: "Add a note", Description: "Adds a note.", DefaultEnabled: true},
			func(_ context.Context, cred mcpgate.Secret, in noteIn) (map[string]any, error) {
				if cred.Reveal() != "notes-credential" {
					return nil, mcpgate.Errorf(mcpgate.EUnauthorized, "wrong credential")
				}
				c.mu.Lock()
				defer c.mu.Unlock()
				c.notes = append(c.notes, in.Text)
				return map[string]any{"added": in.Text}, nil
			}),
		connectors.NewTool(connectors.Spec{Name: "notes_burn", Title: "Burn every note", Description: "Deletes every note.",
			Annotations: connectors.Annotations{Destructive: true}, DefaultApproval: mcpgate.ApprovalModel},
			func(context.Context, mcpgate.Secret, struct{}) (map[string]any, error) {
				c.mu.Lock()
				defer c.mu.Unlock()
				c.notes = nil
				return map[string]any{"burnt": true}, nil
			}),
	}
	return c
}

func (c *noteConnector) Name() string                                          { return "notes" }
func (c *noteConnector) CheckCredential(context.Context, mcpgate.Secret) error { return nil }
func (c *noteConnector) CredentialHint(mcpgate.Secret) string                  { return "notes…" }
func (c *noteConnector) Tools() []*connectors.Tool                             { return c.tools }

func newSvcFixture(t *testing.T, opts ...func(*service.Options)) *svcFixture {
	t.Helper()
	ctx := context.Background()
	f := &svcFixture{conn: newNoteConnector()}
	o := service.Options{Registry: connectors.NewRegistry(f.conn), PublicURL: "http://gw.test"}
	for _, fn := range opts {
		fn(&o)
	}
	env := servicetest.New(t, o)
	f.db, f.sealer, f.svc, f.audit = env.DB, env.Keyring, env.Service, env.Audit
	_, f.owner = env.NewUser(t, "owner@example.com")
	f.ws = f.owner.WorkspaceID
	enter := func(u *mcpgate.User, ws string) *mcpgate.Actor {
		a, _, err := f.svc.Workspaces.Enter(ctx, u, ws, mcpgate.SourceAPI)
		if err != nil {
			t.Fatalf("Enter(%s) err = %v", u.Email, err)
		}
		return a
	}
	au, _ := env.NewUser(t, "admin@example.com")
	mu, _ := env.NewUser(t, "member@example.com")
	_, f.outside = env.NewUser(t, "outsider@example.com")
	for _, m := range []struct {
		u    *mcpgate.User
		role mcpgate.Role
	}{{au, mcpgate.RoleAdmin}, {mu, mcpgate.RoleMember}} {
		_, tok, err := f.svc.Workspaces.Invite(ctx, f.owner, m.u.Email, m.role)
		if err != nil {
			t.Fatalf("Invite() err = %v", err)
		}
		if _, err := f.svc.Workspaces.AcceptInvitation(ctx, m.u, tok); err != nil {
			t.Fatalf("AcceptInvitation() err = %v", err)
		}
	}
	f.admin, f.member = enter(au, f.ws), enter(mu, f.ws)
	if _, err := f.svc.Connections.PutConnection(ctx, f.owner, "notes", "notes-credential"); err != nil {
		t.Fatalf("PutConnection() err = %v", err)
	}
	return f
}

// TestAdminRules: every admin action refuses a plain member with 403 and
// changes nothing, and is allowed to an admin. The front doors hold no such
// rule; this is where it lives.
func TestAdminRules(t *testing.T) {
	f := newSvcFixture(t)
	ctx := context.Background()
	enable := true
	actions := map[string]func(a *mcpgate.Actor) error{
		"SetMemberRole": func(a *mcpgate.Actor) error {
			_, err := f.svc.Workspaces.SetMemberRole(ctx, a, f.member.UserID, mcpgate.RoleMember)
			return err
		},
		"Invite": func(a *mcpgate.Actor) error {
			_, _, err := f.svc.Workspaces.Invite(ctx, a, "new@example.com", mcpgate.RoleMember)
			return err
		},
		"Invitations": func(a *mcpgate.Actor) error { _, err := f.svc.Workspaces.Invitations(ctx, a); return err },
		"PutConnection": func(a *mcpgate.Actor) error {
			_, err := f.svc.Connections.PutConnection(ctx, a, "notes", "notes-credential")
			return err
		},
		"UpdateTool": func(a *mcpgate.Actor) error {
			_, err := f.svc.Tools.UpdateTool(ctx, a, "notes_burn", mcpgate.ToolUpdate{Enabled: &enable})
			return err
		},
		"RemoveMember (someone else)": func(a *mcpgate.Actor) error {
			return f.svc.Workspaces.RemoveMember(ctx, a, f.owner.UserID)
		},
		"DeleteConnection": func(a *mcpgate.Actor) error { return f.svc.Connections.DeleteConnection(ctx, a, "notes") },
	}
	for name, act := range actions {
		t.Run(name, func(t *testing.T) {
			before := len(f.audit.Events())
			if err := act(f.member); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
				t.Fatalf("member: err = %v, want forbidden", err)
			}
			if n := len(f.audit.Events()); n != before {
				t.Fatalf("a refused action was audited as done (%d new events)", n-before)
			}
		})
	}
	// Allowed to an admin (the owner is removed last, and only an owner
	// may remove an owner, so that one is refused to the admin too).
	for name, act := range actions {
		err := act(f.admin)
		if name == "RemoveMember (someone else)" {
			if mcpgate.ErrorCode(err) != mcpgate.EForbidden {
				t.Errorf("admin removing the owner: err = %v, want forbidden", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("admin %s: err = %v", name, err)
		}
	}
}

// TestVisibility: a member sees their own keys and audit rows, an admin
// sees everyone's, and nobody sees another workspace's.
func TestVisibility(t *testing.T) {
	f := newSvcFixture(t)
	ctx := context.Background()
	for _, a := range []*mcpgate.Actor{f.owner, f.member} {
		if _, _, err := f.svc.Keys.CreateKey(ctx, a, mcpgate.NewKey{Name: "k"}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.Tools.CallTool(ctx, a, mcpgate.ToolCall{Tool: "notes_list"}); err != nil {
			t.Fatal(err)
		}
	}
	// The audit writer is a recorder here: copy its rows into the log.
	if err := f.db.InsertAudit(ctx, f.audit.Events()); err != nil {
		t.Fatal(err)
	}
	keys := func(a *mcpgate.Actor) []string {
		ks, err := f.svc.Keys.Keys(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		var owners []string
		for _, k := range ks {
			owners = append(owners, k.UserID)
		}
		return owners
	}
	if got := keys(f.member); len(got) != 1 || got[0] != f.member.UserID {
		t.Errorf("member's keys are owned by %v, want only their own", got)
	}
	if got := keys(f.admin); len(got) != 2 {
		t.Errorf("admin sees %d keys, want 2", len(got))
	}
	if got := keys(f.outside); len(got) != 0 {
		t.Errorf("outsider sees %d keys of their own workspace, want 0", len(got))
	}
	rows, _, err := f.svc.Audit.Audit(ctx, f.member, mcpgate.AuditFilter{ActorID: f.owner.UserID})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range rows {
		if ev.ActorID != f.member.UserID {
			t.Fatalf("member asked for the owner's rows and got %+v", ev)
		}
	}
	if len(rows) == 0 {
		t.Fatal("member sees none of their own rows")
	}
	all, _, _ := f.svc.Audit.Audit(ctx, f.admin, mcpgate.AuditFilter{})
	if len(all) <= len(rows) {
		t.Errorf("admin sees %d rows, member %d: want more for the admin", len(all), len(rows))
	}
	if got, _, _ := f.svc.Audit.Audit(ctx, f.outside, mcpgate.AuditFilter{}); len(got) != 0 {
		t.Errorf("outsider sees %d rows", len(got))
	}
	hours, err := f.svc.Audit.CallsPerHour(ctx, f.member, "", "", time.Now().Add(-time.Hour))
	if err != nil || len(hours) != 1 || hours[0].Calls != 1 {
		t.Errorf("member's chart = %+v, %v; want their one call", hours, err)
	}
	hours, _ = f.svc.Audit.CallsPerHour(ctx, f.admin, "", "", time.Now().Add(-time.Hour))
	if len(hours) != 1 || hours[0].Calls != 2 {
		t.Errorf("admin's chart = %+v; want both calls", hours)
	}
}

// TestSecondConnector: a connector the gateway's code never names gets the
// same policy, scope, confirmation, credential and audit as E2B's tools.
func TestSecondConnector(t *testing.T) {
	f := newSvcFixture(t)
	ctx := context.Background()
	key := *f.member
	key.Role, key.KeyID, key.Source, key.Scope = "", "key1", mcpgate.SourceMCP, mcpgate.ScopeReadOnly

	set, err := f.svc.Tools.ToolSet(ctx, &key)
	if err != nil {
		t.Fatal(err)
	}
	if names := toolNames(set.Tools); !slices.Equal(names, []string{"notes_list"}) {
		t.Errorf("read-only tool set = %v, want [notes_list]", names)
	}
	if _, err := f.svc.Tools.CallTool(ctx, &key, mcpgate.ToolCall{Tool: "notes_add", Arguments: json.RawMessage(`{"text":"x"}`)}); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Errorf("read-only key calling notes_add: err = %v, want forbidden", err)
	}
	key.Scope = mcpgate.ScopeFull
	out, err := f.svc.Tools.CallTool(ctx, &key, mcpgate.ToolCall{Tool: "notes_add", Arguments: json.RawMessage(`{"text":"hello"}`)})
	if err != nil || string(out) != `{"added":"hello"}` {
		t.Fatalf("notes_add = %s, %v", out, err)
	}
	// Off by default, like kill; then on, it needs confirmation.
	if _, err := f.svc.Tools.CallTool(ctx, &key, mcpgate.ToolCall{Tool: "notes_burn"}); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Errorf("disabled notes_burn: err = %v, want forbidden", err)
	}
	on := true
	if _, err := f.svc.Tools.UpdateTool(ctx, f.owner, "notes_burn", mcpgate.ToolUpdate{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Tools.CallTool(ctx, &key, mcpgate.ToolCall{Tool: "notes_burn"})
	if need := (*mcpgate.ConfirmationRequiredError)(nil); !errors.As(err, &need) || need.Tool.Name != "notes_burn" {
		t.Fatalf("unconfirmed notes_burn: err = %v, want confirmation required", err)
	}
	if _, err := f.svc.Tools.CallTool(ctx, &key, mcpgate.ToolCall{Tool: "notes_burn", Confirmed: true}); err != nil {
		t.Fatalf("confirmed notes_burn: err = %v", err)
	}
	var calls []string
	for _, ev := range f.audit.Events() {
		if ev.Kind == mcpgate.KindToolCall {
			calls = append(calls, ev.Action+":"+string(ev.Outcome)+":"+ev.KeyID)
		}
	}
	want := []string{"notes_add:denied:key1", "notes_add:ok:key1", "notes_burn:denied:key1", "notes_burn:ok:key1"}
	if !slices.Equal(calls, want) {
		t.Errorf("audited calls = %v, want %v", calls, want)
	}
}

func toolNames(ts []mcpgate.ToolInfo) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

// TestCall_RefusedWhenAuditSaturated: a call that cannot be audited must not
// run: the gateway fails closed.
func TestCall_RefusedWhenAuditSaturated(t *testing.T) {
	f := newSvcFixture(t)
	f.audit.SetSaturated(true)
	_, err := f.svc.Tools.CallTool(context.Background(), f.owner, mcpgate.ToolCall{Tool: "notes_add", Arguments: json.RawMessage(`{"text":"x"}`)})
	if mcpgate.ErrorCode(err) != mcpgate.EUnavailable {
		t.Fatalf("CallTool() err = %v, want unavailable", err)
	}
	if len(f.conn.notes) != 0 {
		t.Fatalf("the tool ran although the call could not be audited")
	}
}

// TestInvalidate_DuringLoad: a policy read from the database just before a
// change commits, and cached just after the change's notification was
// handled, must not stay cached: the change would be ignored on this
// replica until the cache TTL (30 s) ran out. (The same for a key is
// internal/auth's TestKeys_InvalidateDuringLoad.)
func TestInvalidate_DuringLoad(t *testing.T) {
	t.Run("disabled tool", func(t *testing.T) {
		f := newSvcFixture(t)
		ctx := context.Background()
		var fired atomic.Bool
		off := false
		f.svc.SetBeforeCache(func() {
			if fired.CompareAndSwap(false, true) { // the policy was read: change it (this invalidates)
				if _, err := f.svc.Tools.UpdateTool(ctx, f.owner, "notes_list", mcpgate.ToolUpdate{Enabled: &off}); err != nil {
					t.Error(err)
				}
			}
		})
		f.svc.Invalidate(service.InvalidatePolicy, f.ws) // start from an empty cache
		if _, err := f.svc.Tools.Tools(ctx, f.owner); err != nil {
			t.Fatal(err)
		}
		if !fired.Load() {
			t.Fatal("the race was not staged")
		}
		tools, err := f.svc.Tools.Tools(ctx, f.owner)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range tools {
			if tl.Name == "notes_list" && tl.Enabled {
				t.Fatalf("notes_list after its disabling = enabled, want disabled")
			}
		}
	})
}

// bearer is key as the MCP endpoint presents a bearer token.
func bearer(key string) mcpgate.Presented {
	return mcpgate.Presented{Value: mcpgate.Secret(key), Bearer: true}
}
