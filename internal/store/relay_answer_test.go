package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// A stored relay answer is told to every replica, is taken once and only
// under the binding it was stored with; a second answer under the same id
// and binding does not replace the first, and one under another binding
// (another caller who learnt the id) neither shows to the first nor stands
// in its way.
func TestRelayAnswer_PutTake(t *testing.T) {
	db := storetest.Open(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := listenFor(ctx, db, store.InvalidateRelayAnswer)
	if err := db.PutRelayAnswer(ctx, "ws1", "id1", "foreign", []byte("forged")); err != nil {
		t.Fatal(err)
	}
	if err := db.PutRelayAnswer(ctx, "ws1", "id1", "bind", []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := db.PutRelayAnswer(ctx, "ws1", "id1", "bind", []byte("second")); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the forged one and the first; the second changed nothing
		select {
		case inv := <-got:
			if inv != (store.Invalidation{Kind: store.InvalidateRelayAnswer, WorkspaceID: "ws1", ID: "id1"}) {
				t.Fatalf("notification = %+v", inv)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no notification")
		}
	}
	b, ok, err := db.TakeRelayAnswer(ctx, "id1", "bind")
	if err != nil || !ok || string(b) != "first" {
		t.Fatalf("TakeRelayAnswer() = %q, %v, %v; want first", b, ok, err)
	}
	if _, ok, err := db.TakeRelayAnswer(ctx, "id1", "bind"); ok || err != nil {
		t.Errorf("TakeRelayAnswer(again) = %v, %v; want none", ok, err)
	}
	if _, ok, _ := db.TakeRelayAnswer(ctx, "id1", "other"); ok {
		t.Error("TakeRelayAnswer(another binding) found an answer")
	}
	// Old rows go at the next write.
	if _, err := db.Pool.Exec(ctx, `UPDATE relay_answers SET created_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	if err := db.PutRelayAnswer(ctx, "ws1", "id2", "bind", []byte("x")); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM relay_answers`).Scan(&n); err != nil || n != 1 {
		t.Errorf("rows after the sweep = %d, %v; want 1 (the new one)", n, err)
	}
}

// A session's end is told to every replica, naming the workspace and id,
// and so is a replica's acknowledgement of it, naming the replica too.
func TestNotifySessionEnded(t *testing.T) {
	db := storetest.Open(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := listenFor(ctx, db, store.InvalidateSessionEnd, store.InvalidateSessionEndAck)
	if err := db.NotifySessionEnded(ctx, "ws1", "abc_-1"); err != nil {
		t.Fatal(err)
	}
	select {
	case inv := <-got:
		if inv != (store.Invalidation{Kind: store.InvalidateSessionEnd, WorkspaceID: "ws1", ID: "abc_-1"}) {
			t.Errorf("notification = %+v", inv)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
	}
	if err := db.AckSessionEnded(ctx, "ws1", "abc_-1", "r1"); err != nil {
		t.Fatal(err)
	}
	select {
	case inv := <-got:
		if inv != (store.Invalidation{Kind: store.InvalidateSessionEndAck, WorkspaceID: "ws1", ID: "abc_-1/r1"}) {
			t.Errorf("acknowledgement = %+v", inv)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no acknowledgement")
	}
}
