package audit

import (
	"sync"
	"syscall"
)

// SpoolFaults are the disk's failures a test injects into a spool.
type SpoolFaults struct {
	// Room, when not negative, is how many more bytes the disk takes: a
	// write past it is short and fails with ENOSPC, as on a full disk.
	Room int64
	// SyncErr, when set, fails every fsync.
	SyncErr error
	// ProgressErr, when set, fails every record of a replay's progress
	// (nil: progress is written as usual).
	ProgressErr error
}

// InjectSpoolFaults makes sp's file fail as f says.
func InjectSpoolFaults(sp *Spool, f SpoolFaults) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.f = &faultyFile{spoolFile: sp.f, room: f.Room, syncErr: f.SyncErr}
	if f.ProgressErr != nil {
		sp.saveProgress = func(int64) error { return f.ProgressErr }
	}
}

// SetRoom gives a spool with injected faults room more bytes of disk.
func SetRoom(sp *Spool, room int64) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	ff := sp.f.(*faultyFile)
	ff.mu.Lock()
	ff.room = room
	ff.mu.Unlock()
}

type faultyFile struct {
	spoolFile
	mu      sync.Mutex
	room    int64
	syncErr error
}

func (f *faultyFile) WriteAt(b []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.room < 0 || int64(len(b)) <= f.room {
		n, err := f.spoolFile.WriteAt(b, off)
		if f.room >= 0 {
			f.room -= int64(n)
		}
		return n, err
	}
	// As os.File.WriteAt on a full disk: the bytes that fit land, and
	// the count says none did.
	n, err := f.spoolFile.WriteAt(b[:f.room], off)
	f.room -= int64(n)
	if err == nil {
		err = syscall.ENOSPC
	}
	return 0, err
}

func (f *faultyFile) Sync() error {
	if f.syncErr != nil {
		return f.syncErr
	}
	return f.spoolFile.Sync()
}
