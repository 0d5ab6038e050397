package store_test

import (
	"context"
	"testing"

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
