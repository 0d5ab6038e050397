package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

const webhookSecret mcpgate.Secret = "whsec-0123456789abcdef"

// TestWebhookSecret_SealedAndRotated: the webhook secret is sealed bound to
// its workspace and row (moved to another workspace's row it does not
// open), follows key rotation like credentials, and is kept when a PUT
// does not give a new one.
func TestWebhookSecret_SealedAndRotated(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	k := mustKeyringOn(t, db, testRoot)
	ws, _ := mustWorkspace(t, db, "ada@example.com")
	other, _ := mustWorkspace(t, db, "bob@example.com")
	in := mcpgate.NotificationInput{WebhookURL: "https://hooks.example/a", WebhookFormat: mcpgate.WebhookJSON, WebhookSecret: webhookSecret}
	for _, w := range []string{ws, other} {
		if err := db.SetNotifications(ctx, k, w, in, "…cdef"); err != nil {
			t.Fatal(err)
		}
	}
	in.WebhookSecret, in.WebhookURL = "", "https://hooks.example/b"
	if err := db.SetNotifications(ctx, k, ws, in, ""); err != nil {
		t.Fatalf("SetNotifications(keep secret) err = %v", err)
	}
	if got, err := db.FindWebhook(ctx, k, ws); err != nil || got.Secret != webhookSecret || got.URL != "https://hooks.example/b" {
		t.Fatalf("FindWebhook() = %+v, %v", got, err)
	}
	// Bob's ciphertext in Ada's row does not open.
	if _, err := db.Pool.Exec(ctx, `UPDATE webhook_secrets SET secret = (SELECT secret FROM webhook_secrets WHERE workspace_id = $2)
		WHERE workspace_id = $1`, ws, other); err != nil {
		t.Fatal(err)
	}
	if _, err := db.FindWebhook(ctx, k, ws); err == nil {
		t.Fatal("a ciphertext moved to another workspace's row opened")
	}
	if _, err := k.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	moved, failed, err := db.ResealOld(ctx, k, 10, nil)
	if err != nil || moved != 1 || len(failed) != 1 {
		t.Fatalf("ResealOld() = %d, %v, %v; want bob's moved and ada's (damaged) reported", moved, failed, err)
	}
	if got, err := db.FindWebhook(ctx, k, other); err != nil || got.Secret != webhookSecret {
		t.Fatalf("FindWebhook(after re-seal) = %+v, %v", got, err)
	}
	usage, _ := db.SealedTermUsage(ctx)
	if len(usage) != 2 || usage[1] != (store.TermUsage{Term: 2, Rows: 1}) {
		t.Errorf("SealedTermUsage() = %v", usage)
	}
	// Clearing the URL deletes the secret.
	if err := db.SetNotifications(ctx, k, other, mcpgate.NotificationInput{Email: true, WebhookFormat: mcpgate.WebhookJSON}, ""); err != nil {
		t.Fatal(err)
	}
	if n, err := db.Notifications(ctx, other); err != nil || n.WebhookSecretHint != "" || !n.Email {
		t.Errorf("Notifications(cleared) = %+v, %v", n, err)
	}
}

// TestClaimDeliveries: a due delivery is claimed by one owner at a time:
// a row another transaction holds locked is skipped, not waited for, and a
// claimed row is not claimed again until its lease expires. Only the owner
// still holding the claim records or releases; each workspace lists only
// its own deliveries.
func TestClaimDeliveries(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	ws, _ := mustWorkspace(t, db, "ada@example.com")
	other, _ := mustWorkspace(t, db, "bob@example.com")
	now := time.Now()
	id, err := db.CreateDelivery(ctx, store.NewDelivery{WorkspaceID: ws, ApprovalID: "00000000-0000-0000-0000-0000000000a1",
		Event: mcpgate.EventApprovalRequested, URL: "https://hooks.example/a", Body: []byte(`{"event":"approval.requested"}`), Due: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateDelivery(ctx, store.NewDelivery{WorkspaceID: other, ApprovalID: "00000000-0000-0000-0000-0000000000b1",
		Event: mcpgate.EventApprovalRequested, URL: "https://hooks.example/b", Body: []byte(`{}`), Due: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	// Locked by another transaction (a replica claiming it right now): skipped.
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM webhook_deliveries WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	if got, err := db.ClaimDeliveries(ctx, "b", now, time.Minute, 10); err != nil || len(got) != 0 {
		t.Fatalf("ClaimDeliveries(locked) = %+v, %v, want none", got, err)
	}
	_ = tx.Rollback(ctx)

	got, err := db.ClaimDeliveries(ctx, "a", now, time.Minute, 10)
	if err != nil || len(got) != 1 || got[0].ID != id || got[0].WorkspaceID != ws || got[0].Attempt != 1 ||
		string(got[0].Body) != `{"event":"approval.requested"}` || got[0].URL != "https://hooks.example/a" {
		t.Fatalf("ClaimDeliveries() = %+v, %v", got, err)
	}
	if again, _ := db.ClaimDeliveries(ctx, "b", now.Add(59*time.Second), time.Minute, 10); len(again) != 0 {
		t.Fatalf("claimed twice within the lease: %+v", again)
	}
	if err := db.ReleaseDelivery(ctx, "b", id, now); err != nil {
		t.Fatal(err)
	}
	if again, _ := db.ClaimDeliveries(ctx, "b", now, time.Minute, 10); len(again) != 0 {
		t.Fatal("another owner's release freed the claim")
	}
	held, err := db.RecordDelivery(ctx, "b", mcpgate.WebhookDelivery{ID: id, State: mcpgate.DeliveryDelivered, Attempts: 1}, time.Time{})
	if err != nil || held {
		t.Fatalf("RecordDelivery(not the owner) = %v, %v", held, err)
	}
	held, err = db.RecordDelivery(ctx, "a", mcpgate.WebhookDelivery{ID: id, State: mcpgate.DeliveryPending, Attempts: 1, LastStatus: 500,
		LastError: "the receiver answered 500"}, now.Add(2*time.Second))
	if err != nil || !held {
		t.Fatalf("RecordDelivery(owner) = %v, %v", held, err)
	}
	if again, _ := db.ClaimDeliveries(ctx, "b", now.Add(time.Second), time.Minute, 10); len(again) != 0 {
		t.Fatal("claimed before its next attempt is due")
	}
	if again, _ := db.ClaimDeliveries(ctx, "b", now.Add(2*time.Second), time.Minute, 10); len(again) != 1 || again[0].Attempt != 2 {
		t.Fatalf("ClaimDeliveries(retry due) = %+v", again)
	}
	list, err := db.ListDeliveries(ctx, ws)
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].Attempts != 2 || list[0].LastStatus != 500 {
		t.Fatalf("ListDeliveries(ws) = %+v, %v", list, err)
	}
	if list, _ := db.ListDeliveries(ctx, other); len(list) != 1 || list[0].ID == id {
		t.Errorf("ListDeliveries(other) = %+v", list)
	}
	// Final: the URL and body, needed for no other attempt, are dropped.
	if held, err := db.RecordDelivery(ctx, "b", mcpgate.WebhookDelivery{ID: id, State: mcpgate.DeliveryDelivered, Attempts: 2, LastStatus: 204},
		time.Time{}); err != nil || !held {
		t.Fatalf("RecordDelivery(final) = %v, %v", held, err)
	}
	var url string
	var body []byte
	if err := db.Pool.QueryRow(ctx, `SELECT url, body FROM webhook_deliveries WHERE id = $1`, id).Scan(&url, &body); err != nil || url != "" || len(body) != 0 {
		t.Errorf("after the final attempt: url %q, body %q, %v", url, body, err)
	}
}
