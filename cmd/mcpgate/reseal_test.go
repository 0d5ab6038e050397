package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testutil"
	"github.com/mcpgate/mcpgate/internal/testutil/credtest"
)

// TestServe_ResealsInTheBackground: a running gateway moves credentials to
// the newest key term by itself, with nobody running `vault rotate`: rows
// left under an old term when it starts, rows after its own keyring rotated
// (as Maintain does at SealCap or MaxTermAge), and rows after another
// replica rotated (loaded on the keyring's refresh). It stops at once on
// shutdown, although a pass is still settling.
func TestServe_ResealsInTheBackground(t *testing.T) {
	e := newCmdEnv(t)
	ctx := context.Background()
	want := e.populate(t, 12)
	// An interrupted `vault rotate` added term 2 and moved nothing.
	if _, err := e.keyring(t).Rotate(ctx); err != nil {
		t.Fatalf("Rotate() err = %v", err)
	}

	logs := &testutil.LockedBuffer{}
	gw, err := e.startGateway(t, e.root, logs)
	if err != nil {
		t.Fatalf("newGateway() err = %v", err)
	}
	var once sync.Once
	closeGW := func() { once.Do(gw.Close) }
	t.Cleanup(closeGW)
	credtest.WaitTermUsage(t, e.db, "2:12")

	if _, err := gw.Keyring.Rotate(ctx); err != nil {
		t.Fatalf("gateway Rotate() err = %v", err)
	}
	credtest.WaitTermUsage(t, e.db, "3:12")

	if _, err := e.keyring(t).Rotate(ctx); err != nil {
		t.Fatalf("other replica Rotate() err = %v", err)
	}
	if err := gw.Keyring.Refresh(ctx); err != nil { // Maintain's periodic reload, without the wait
		t.Fatalf("Refresh() err = %v", err)
	}
	credtest.WaitTermUsage(t, e.db, "4:12")
	e.checkAll(t, want, 4)
	// Each pass logs what it moved once it has nothing left to move; a pass
	// follows terms added while it runs, so the lines may be fewer than 3.
	deadline := time.Now().Add(15 * time.Second)
	for movedLogged(t, logs.String()) < 3*12 {
		if time.Now().After(deadline) {
			t.Fatalf("log says %d rows moved after 15s, want 36:\n%s", movedLogged(t, logs.String()), logs)
		}
		time.Sleep(25 * time.Millisecond)
	}

	start := time.Now()
	closeGW()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close() took %s with a re-seal pass settling, want it to stop at once", d)
	}
	out := logs.String()
	if n := movedLogged(t, out); n != 3*12 {
		t.Errorf("log says %d rows moved, want 36 (12 per term, each once):\n%s", n, out)
	}
	if strings.Contains(out, "re-seal credentials") {
		t.Errorf("log reports a failed re-seal pass:\n%s", out)
	}
	for _, s := range append([]string{e.root}, values(want)...) {
		if strings.Contains(out, s) {
			t.Fatalf("log shows a secret %q:\n%s", s, out)
		}
	}
}

// movedLogged sums "moved" over the "credentials re-sealed" lines of a JSON
// log.
func movedLogged(t *testing.T, log string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(log, "\n") {
		var l struct {
			Msg   string
			Moved int
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "credentials re-sealed" {
			n += l.Moved
		}
	}
	return n
}

func values(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
