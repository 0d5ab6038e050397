package service_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
)

func TestSessions(t *testing.T) {
	env := servicetest.New(t, service.Options{})
	ctx := context.Background()
	ada, _ := env.NewUser(t, "ada@example.com")
	bob, _ := env.NewUser(t, "bob@example.com")
	mustSession := func(u *mcpgate.User, addr, ua string) string {
		t.Helper()
		id, err := env.DB.CreateSession(ctx, u.ID, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if err := env.DB.DescribeSession(ctx, id, addr, ua); err != nil {
			t.Fatal(err)
		}
		return id
	}
	here := mustSession(ada, "192.0.2.1", "Firefox")
	phone := mustSession(ada, "192.0.2.2", "Safari")
	laptop := mustSession(ada, "192.0.2.3", "\x00\xff"+strings.Repeat("é", 300))
	bobs := mustSession(bob, "198.51.100.9", "Chrome")

	list, err := env.Service.Accounts.Sessions(ctx, ada, here)
	if err != nil || len(list) != 3 {
		t.Fatalf("Sessions() = %v, %v; want ada's 3", list, err)
	}
	for _, s := range list {
		if s.ID == bobs {
			t.Fatal("ada sees bob's session")
		}
		if s.Current != (s.ID == here) {
			t.Fatalf("session %s current = %v", s.ID, s.Current)
		}
		if len(s.UserAgent) > 200 || !utf8.ValidString(s.UserAgent) || strings.ContainsRune(s.UserAgent, 0) {
			t.Fatalf("user agent kept at %d bytes", len(s.UserAgent))
		}
	}
	if err := env.Service.Accounts.EndSession(ctx, ada, bobs); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Fatalf("EndSession(bob's) err = %v, want not found", err)
	}
	if _, err := env.DB.FindSessionUser(ctx, bobs); err != nil {
		t.Fatalf("bob's session ended by ada: %v", err)
	}
	if err := env.Service.Accounts.EndSession(ctx, ada, phone); err != nil {
		t.Fatal(err)
	}
	if _, err := env.DB.FindSessionUser(ctx, phone); err == nil {
		t.Fatal("ended session still works")
	}
	n, err := env.Service.Accounts.EndOtherSessions(ctx, ada, here)
	if err != nil || n != 1 {
		t.Fatalf("EndOtherSessions() = %d, %v; want the laptop's 1", n, err)
	}
	if _, err := env.DB.FindSessionUser(ctx, laptop); err == nil {
		t.Fatal("laptop session survived")
	}
	if _, err := env.DB.FindSessionUser(ctx, here); err != nil {
		t.Fatalf("this session ended: %v", err)
	}
	if _, err := env.DB.FindSessionUser(ctx, bobs); err != nil {
		t.Fatalf("bob's session ended: %v", err)
	}
	if ev := env.Audit.Last(); ev.Action != string(mcpgate.ActionSessionsEnded) || ev.ActorID != ada.ID {
		t.Fatalf("last audit event = %+v", ev)
	}
}
