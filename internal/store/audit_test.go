package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

func TestAudit_ListAndHourlyScopedByWorkspaceAndActor(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	wsA, a := mustWorkspace(t, db, "a@example.com")
	wsB, b := mustWorkspace(t, db, "b@example.com")
	now := time.Now().UTC()
	ev := func(ws, actor string, outcome mcpgate.Outcome) mcpgate.AuditEvent {
		return mcpgate.AuditEvent{WorkspaceID: ws, ActorID: actor, Kind: "tool_call", Action: "e2b_list_sandboxes",
			Outcome: outcome, CreatedAt: now}
	}
	err := db.InsertAudit(ctx, []mcpgate.AuditEvent{
		ev(wsA, a.ID, mcpgate.OutcomeOK), ev(wsA, a.ID, mcpgate.OutcomeError),
		ev(wsA, "", mcpgate.OutcomeOK), ev(wsB, b.ID, mcpgate.OutcomeOK),
	})
	if err != nil {
		t.Fatalf("InsertAudit() err = %v", err)
	}
	tests := []struct {
		name, ws, actor      string
		wantCalls, wantFails int
	}{
		{name: "whole workspace", ws: wsA, wantCalls: 3, wantFails: 1},
		{name: "one actor", ws: wsA, actor: a.ID, wantCalls: 2, wantFails: 1},
		{name: "actor of another workspace", ws: wsA, actor: b.ID},
		{name: "other workspace", ws: wsB, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buckets, err := db.AuditHourly(ctx, tt.ws, tt.actor, now.Add(-time.Hour))
			if err != nil {
				t.Fatalf("AuditHourly() err = %v", err)
			}
			calls, fails := 0, 0
			for _, b := range buckets {
				calls += b.Calls
				fails += b.Errors
			}
			if calls != tt.wantCalls || fails != tt.wantFails {
				t.Fatalf("AuditHourly() = %d calls, %d errors; want %d, %d", calls, fails, tt.wantCalls, tt.wantFails)
			}
			items, _, err := db.ListAudit(ctx, tt.ws, mcpgate.AuditFilter{ActorID: tt.actor})
			if err != nil || len(items) != tt.wantCalls {
				t.Fatalf("ListAudit() = %d items, %v; want %d", len(items), err, tt.wantCalls)
			}
		})
	}
}
