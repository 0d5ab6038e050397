package reliability

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// smallDisk mounts a tmpfs of size bytes at a new directory, unmounted when
// the test ends: a real filesystem that fills, for the audit spool. It
// needs root (CAP_SYS_ADMIN), which the test machines have; without it the
// test fails saying so, rather than pass unchecked.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Fatalf("mount a %s tmpfs for the spool (needs root): %v", size, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes to a file under dir until the disk refuses.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	if f == nil {
		return
	}
	defer f.Close()
	chunk := make([]byte, 512)
	for {
		if _, err := f.Write(chunk); err != nil {
			return
		}
	}
}

// TestStopDuringOutage_NearlyFullDisk is the spool row on the real
// binary: a stop during a refused outage with DATA_DIR on a disk with room
// for part of the queue. The log's counts are exact (spooled plus lost is
// every call answered during the outage); the next start, with the disk
// still full, serves, and writes each spooled event once: exactly the calls
// the log said were lost have no audit row, and none has two.
func TestStopDuringOutage_NearlyFullDisk(t *testing.T) {
	t.Parallel()
	dataDir := smallDisk(t, "32k") // room for some 40 events of the 100 the outage answers
	o := stopOutage(t, dataDir)
	spooled := loggedCount(o.logs, "audit events spooled at shutdown") +
		max(loggedCount(o.logs, "audit events spooled during the database outage"), 0)
	lost := loggedCount(o.logs, "audit events lost at shutdown")
	if spooled <= 0 || lost <= 0 || spooled+lost != len(o.calls) {
		t.Fatalf("log says %d spooled and %d lost of the %d calls answered during the outage; want both, adding up\n%s",
			spooled, lost, len(o.calls), tail(o.logs.String(), 3000))
	}
	fill(t, dataDir) // whatever room the stop left: the disk is full at the next start
	db := o.restart()
	if st, body := httpGet(o.base + "/readyz"); st != http.StatusOK {
		t.Fatalf("/readyz after starting on a full disk = %d %s", st, body)
	}
	if n := loggedCount(o.logs, "audit spool replayed"); n != spooled {
		t.Errorf("log says %d audit events replayed at the next start, want the %d spooled", n, spooled)
	}
	missing := unaudited(t, db, o.calls) // fails the test for any call audited twice
	if len(missing) != lost {
		t.Errorf("%d of the %d calls answered during the outage have no audit row, want the %d the log said were lost",
			len(missing), len(o.calls), lost)
	}
	if v := metric(o.base, "mcpgate_audit_spool_events"); v != 0 {
		t.Errorf("mcpgate_audit_spool_events after the replay = %v, want 0", v)
	}
	if v := metric(o.base, "mcpgate_audit_spool_free_bytes"); v < 0 || v > 32<<10 {
		t.Errorf("mcpgate_audit_spool_free_bytes = %v, want what the 32 KiB disk has left", v)
	}
	if !strings.Contains(o.logs.String(), "audit spool: the disk under DATA_DIR is nearly full") {
		t.Errorf("no warning at start that the spool's disk is nearly full\n%s", tail(o.logs.String(), 3000))
	}
	t.Logf("stop during an outage on a 32 KiB disk: %d calls answered, %d spooled, %d lost (as logged), "+
		"started on the full disk and replayed %d, none twice", len(o.calls), spooled, lost, spooled)
}
