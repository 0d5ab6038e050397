package e2bsim

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fault is an injected misbehaviour for the requests it matches. Faults are
// tried in the order injected; the first match answers instead of the route.
type Fault struct {
	// Method matches the request method; empty matches any.
	Method string
	// Path matches the URL path exactly, or as a prefix when it ends in "*".
	// Empty matches any.
	Path string
	// Status is the HTTP status to answer (default 500).
	Status int
	// Body, when set, is sent as is (e.g. malformed JSON); otherwise E2B's
	// error shape with Message.
	Body    string
	Message string
	// RetryAfter is the Retry-After header value (429s get "30" by default).
	RetryAfter string
	// Delay holds the answer back; a client deadline shorter than it times
	// out.
	Delay time.Duration
	// Reset closes the connection without an answer.
	Reset bool
	// Times is how many requests the fault answers; 0 means until removed.
	Times int
}

type fault struct {
	Fault
	used int
}

// Inject adds a fault and returns a function that removes it.
func (s *Server) Inject(f Fault) (remove func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ff := &fault{Fault: f}
	s.faults = append(s.faults, ff)
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			for i, x := range s.faults {
				if x == ff {
					s.faults = append(s.faults[:i], s.faults[i+1:]...)
					return
				}
			}
		})
	}
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// matchFault returns the first fault matching r and counts its use; callers
// hold s.mu.
func (s *Server) matchFault(r *http.Request) *fault {
	for i, f := range s.faults {
		if f.Method != "" && f.Method != r.Method {
			continue
		}
		if p, ok := strings.CutSuffix(f.Path, "*"); ok {
			if !strings.HasPrefix(r.URL.Path, p) {
				continue
			}
		} else if f.Path != "" && f.Path != r.URL.Path {
			continue
		}
		f.used++
		if f.Times > 0 && f.used >= f.Times {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
		}
		return f
	}
	return nil
}

func (f *fault) serve(w http.ResponseWriter, r *http.Request) {
	if !sleep(r, f.Delay) {
		return
	}
	if f.Reset {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // HTTP/2 or a recorder: abort the stream
	}
	status := f.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	} else if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	if f.Body != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(f.Body))
		return
	}
	msg := f.Message
	if msg == "" {
		msg = http.StatusText(status)
	}
	writeJSON(w, status, apiError{Code: status, Message: msg})
}

// ManualClock is a clock a test moves by hand; pass its Now as Options.Now.
type ManualClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewManualClock returns a clock stopped at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{t: t} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
