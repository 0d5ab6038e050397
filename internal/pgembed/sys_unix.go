//go:build unix

package pgembed

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// serverUser is the account the postgres binaries run as.
type serverUser struct {
	name   string
	uid    int
	gid    int
	groups []int // supplementary group ids, for the traversal check
	// switchTo is set when we are root and must drop to this user; nil means
	// the binaries run as ourselves.
	switchTo *syscall.Credential
}

// resolveServerUser returns the current user, or, when running as root
// (initdb and postgres refuse root), the "postgres" system user if it exists,
// else "nobody".
func resolveServerUser() (serverUser, error) {
	if os.Geteuid() != 0 {
		return serverUser{name: currentUserName(), uid: os.Geteuid(), gid: os.Getegid()}, nil
	}
	var tried []string
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		uid, err1 := strconv.Atoi(u.Uid)
		gid, err2 := strconv.Atoi(u.Gid)
		if err1 != nil || err2 != nil || uid == 0 {
			tried = append(tried, fmt.Sprintf("%s: unusable uid %q gid %q", name, u.Uid, u.Gid))
			continue
		}
		su := serverUser{
			name: name, uid: uid, gid: gid,
			// Groups is empty on purpose: the child must not keep root's
			// supplementary groups.
			switchTo: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}},
		}
		if ids, err := u.GroupIds(); err == nil {
			for _, s := range ids {
				if g, err := strconv.Atoi(s); err == nil {
					su.groups = append(su.groups, g)
				}
			}
		}
		return su, nil
	}
	return serverUser{}, fmt.Errorf("running as root, and PostgreSQL refuses to run as root, but no unprivileged user to run it as was found (%v): "+
		"create a \"postgres\" system user (apt-get install postgresql does) or run mcpgate as a normal user", tried)
}

func currentUserName() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Geteuid())
}

// sysProcAttr puts every child in its own process group so that a Ctrl-C
// sent to our foreground process group reaches only us, and the caller can
// stop the server cleanly; it also drops root privileges when needed.
func (u serverUser) sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: u.switchTo}
}

// own hands path (not following symlinks) to the server user when we run as
// root; otherwise the files are ours already.
func (u serverUser) own(path string) error {
	if u.switchTo == nil {
		return nil
	}
	if err := os.Lchown(path, u.uid, u.gid); err != nil {
		return fmt.Errorf("chown %s to %s: %w", path, u.name, err)
	}
	return nil
}

// ownTree chowns a whole directory tree to the server user, but only when its
// root belongs to someone else: the usual case (already ours) costs one stat.
// It happens when a cluster made by a normal user is later started by root.
func (u serverUser) ownTree(root string) error {
	if u.switchTo == nil {
		return nil
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == u.uid && int(st.Gid) == u.gid {
		return nil
	}
	return filepath.WalkDir(root, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return u.own(path)
	})
}

// checkTraverse reports the first directory on the way to dir that the server
// user cannot search, so that the error names what to fix instead of a
// "permission denied" from deep inside initdb. It reads mode bits only (no
// ACLs), which is what a default Debian system uses.
func (u serverUser) checkTraverse(dir string) error {
	if u.switchTo == nil {
		return nil
	}
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if ok && !u.canSearch(fi.Mode().Perm(), int(st.Uid), int(st.Gid)) {
			return fmt.Errorf("user %s, which runs the embedded PostgreSQL because initdb refuses root, cannot reach DATA_DIR %s: "+
				"directory %s (mode %04o) is not searchable by it; choose a DATA_DIR outside it, or run chmod o+x %s",
				u.name, dir, p, fi.Mode().Perm(), p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

func (u serverUser) canSearch(perm fs.FileMode, uid, gid int) bool {
	switch {
	case uid == u.uid:
		return perm&0o100 != 0
	case gid == u.gid || slices.Contains(u.groups, gid):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

// lockFile takes an exclusive, non-blocking flock on path. The kernel drops
// it when the process dies, so a crash never leaves DATA_DIR locked.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &inUseError{lock: path, holder: string(holder)}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// Record who holds it, for the error message of the next comer. The pid
	// is informative only; the flock is what excludes.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// noFollow makes OpenFile refuse a symlink where we expect our own file.
const noFollow = syscall.O_NOFOLLOW
