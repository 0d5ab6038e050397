package store_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// A forwarded subscription operation goes from its writer to the replica
// holding the stream and back: stored and told (naming the binding),
// claimed once and in order, answered and told (naming the id), taken
// once; one nobody claimed can be withdrawn, one claimed cannot, and an
// answer to a withdrawn one is dropped.
func TestStreamOps(t *testing.T) {
	db := storetest.Open(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := listenFor(ctx, db, store.InvalidateStreamOp, store.InvalidateStreamOpAnswered)
	next := func(want store.Invalidation) {
		t.Helper()
		select {
		case inv := <-got:
			if inv != want {
				t.Errorf("notification = %+v, want %+v", inv, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification %+v", want)
		}
	}
	for _, id := range []string{"op1", "op2"} {
		if err := db.PutStreamOp(ctx, "ws1", id, "bind-a", []byte("sealed-"+id)); err != nil {
			t.Fatal(err)
		}
		next(store.Invalidation{Kind: store.InvalidateStreamOp, WorkspaceID: "ws1", ID: "bind-a"})
	}
	if err := db.PutStreamOp(ctx, "ws1", "op3", "bind-b", []byte("sealed-op3")); err != nil {
		t.Fatal(err)
	}
	next(store.Invalidation{Kind: store.InvalidateStreamOp, WorkspaceID: "ws1", ID: "bind-b"})

	claim := func(binding string) []string {
		t.Helper()
		var got []string
		if err := db.ClaimStreamOps(ctx, binding, func(id string, op []byte) { got = append(got, id+"="+string(op)) }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if ops := claim("bind-a"); len(ops) != 2 || ops[0] != "op1=sealed-op1" || ops[1] != "op2=sealed-op2" {
		t.Fatalf("claim = %q; want op1, op2 in order", ops)
	}
	if again := claim("bind-a"); len(again) != 0 {
		t.Errorf("second claim = %q; want none", again)
	}
	if withdrawn, err := db.WithdrawStreamOp(ctx, "op1"); err != nil || withdrawn {
		t.Errorf("withdraw a claimed operation = %v, %v; want false", withdrawn, err)
	}
	if _, ok, err := db.TakeStreamOpAnswer(ctx, "op1"); err != nil || ok {
		t.Errorf("answer before it was written: ok %v, %v", ok, err)
	}
	if err := db.AnswerStreamOp(ctx, "ws1", "op1", []byte("answer1")); err != nil {
		t.Fatal(err)
	}
	next(store.Invalidation{Kind: store.InvalidateStreamOpAnswered, WorkspaceID: "ws1", ID: "op1"})
	if a, ok, err := db.TakeStreamOpAnswer(ctx, "op1"); err != nil || !ok || string(a) != "answer1" {
		t.Errorf("take = %q, %v, %v", a, ok, err)
	}
	if _, ok, _ := db.TakeStreamOpAnswer(ctx, "op1"); ok {
		t.Error("an answer was taken twice")
	}

	if withdrawn, err := db.WithdrawStreamOp(ctx, "op3"); err != nil || !withdrawn {
		t.Errorf("withdraw an unclaimed operation = %v, %v; want true", withdrawn, err)
	}
	if ops := claim("bind-b"); len(ops) != 0 {
		t.Errorf("a withdrawn operation was claimed: %q", ops)
	}
	if err := db.AnswerStreamOp(ctx, "ws1", "op3", []byte("late")); err != nil {
		t.Errorf("answer a withdrawn operation: %v", err)
	}

	// A row left behind goes at the next write.
	if _, err := db.Pool.Exec(ctx, `UPDATE stream_ops SET created_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	if err := db.PutStreamOp(ctx, "ws1", "op4", "bind-c", []byte("x")); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM stream_ops`).Scan(&n); err != nil || n != 1 {
		t.Errorf("rows after the sweep = %d, %v; want 1 (the new one)", n, err)
	}
}

// listenFor listens on the invalidation channel until ctx ends and passes
// on the notifications of kinds.
func listenFor(ctx context.Context, db *store.DB, kinds ...string) <-chan store.Invalidation {
	got := make(chan store.Invalidation, 16)
	ready := make(chan struct{})
	go db.Listen(ctx, slog.New(slog.DiscardHandler), ready, func(inv store.Invalidation) {
		if slices.Contains(kinds, inv.Kind) {
			got <- inv
		}
	}, nil)
	<-ready
	return got
}
