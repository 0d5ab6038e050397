package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// freePort returns a loopback address with a port free right now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// buildBinary builds a package of this module into dir.
func buildBinary(ctx context.Context, repo, dir, pkg, name string) (string, error) {
	out := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// proc is a subprocess whose resource use is read from /proc.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *tailBuffer
	done chan struct{}
}

func startProc(name, bin string, args, env []string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	p := &proc{name: name, cmd: cmd, log: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	// Its own process group, so that a stray signal to the benchmark's
	// group does not reach it first; stop() ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the process to end (SIGTERM) and kills it after 20 s.
func (p *proc) stop() {
	if p == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// waitHTTP polls url until it answers (200 unless anyStatus), the process
// exits, or timeout.
func (p *proc) waitHTTP(url string, anyStatus bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	c := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("%s exited during start-up:\n%s", p.name, p.log.String())
		}
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if anyStatus || resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer %s within %s:\n%s", p.name, url, timeout, p.log.String())
}

// usage is a process's CPU time and memory at one moment.
type usage struct {
	cpu   time.Duration // user + system
	rss   int64         // VmRSS, bytes
	hwm   int64         // VmHWM (peak RSS), bytes
	valid bool
}

// readUsage reads /proc/<pid>/stat and /proc/<pid>/status.
func readUsage(pid int) usage {
	var u usage
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u
	}
	// The command name (field 2) may hold spaces: fields count from after ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return u
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return u
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	u.cpu = time.Duration(ut+st) * time.Second / clockTicks
	sf, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u
	}
	defer sf.Close()
	sc := bufio.NewScanner(sf)
	for sc.Scan() {
		line := sc.Text()
		for _, k := range []struct {
			prefix string
			dst    *int64
		}{{"VmRSS:", &u.rss}, {"VmHWM:", &u.hwm}} {
			if rest, ok := strings.CutPrefix(line, k.prefix); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				*k.dst = kb << 10
			}
		}
	}
	u.valid = true
	return u
}

// tailBuffer keeps the last max bytes written to it, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

var _ io.Writer = (*tailBuffer)(nil)

// sampleEvery runs sample every interval, in a goroutine of its own, until
// the stop it returns is called. stop returns once sampling has ended, so
// what sample wrote may be read after it without a lock.
func sampleEvery(interval time.Duration, sample func()) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
