package service

import (
	"fmt"
	"testing"
)

// The bounds of waits are reserved, not counted: a place is taken under the
// lock or refused; per person in a workspace and per workspace, each
// counted apart; released places are taken again, and nothing is left
// behind once every wait is over.
func TestApprovalWaits_Bounds(t *testing.T) {
	var w approvalWaits
	var held []*approvalWaiter
	take := func(ws, user string) bool {
		wt, ok := w.reserve(ws, user, fmt.Sprintf("ap-%d", len(held)))
		if ok {
			held = append(held, wt)
		}
		return ok
	}
	for i := range maxWaitsPerUser {
		if !take("ws1", "u1") {
			t.Fatalf("wait %d of u1 refused", i+1)
		}
	}
	if take("ws1", "u1") {
		t.Fatal("u1 waits past the per-person bound")
	}
	if !take("ws2", "u1") {
		t.Fatal("u1's waits in ws1 count against ws2")
	}
	for u := 2; len(held) < maxWaitsPerWorkspace+1; u++ {
		for range maxWaitsPerUser {
			if len(held) == maxWaitsPerWorkspace+1 {
				break
			}
			if !take("ws1", fmt.Sprintf("u%d", u)) {
				t.Fatalf("wait refused under the bounds (%d held)", len(held))
			}
		}
	}
	if take("ws1", "u-new") {
		t.Fatal("a new person waits past the per-workspace bound")
	}
	if !take("ws3", "u-new") {
		t.Fatal("ws1's waits count against ws3")
	}
	w.release(held[0]) // one of u1's in ws1
	if !take("ws1", "u1") {
		t.Fatal("a released place was not taken again")
	}
	for _, wt := range held[1:] {
		w.release(wt)
	}
	if w.count() != 0 || len(w.perWS) != 0 || len(w.perUser) != 0 {
		t.Fatalf("after every release: %d waits, %v, %v; want none", w.count(), w.perWS, w.perUser)
	}
}

// A wake reaches the waits for that approval of that workspace only, or
// every wait with no id, and never blocks on a wait that was not read yet.
func TestApprovalWaits_Wake(t *testing.T) {
	var w approvalWaits
	a, _ := w.reserve("ws1", "u1", "ap1")
	b, _ := w.reserve("ws2", "u1", "ap1") // the same id in another workspace
	c, _ := w.reserve("ws1", "u2", "ap2")
	woken := func(wt *approvalWaiter) bool {
		select {
		case <-wt.wake:
			return true
		default:
			return false
		}
	}
	w.wake("ws1", "ap1")
	w.wake("ws1", "ap1") // a second wake before the read adds nothing, and does not block
	if !woken(a) || woken(a) || woken(b) || woken(c) {
		t.Fatal("wake(ws1, ap1) reached the wrong waits")
	}
	w.wake("", "")
	if !woken(a) || !woken(b) || !woken(c) {
		t.Fatal("wake of every wait missed one")
	}
}
