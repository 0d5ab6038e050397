package e2bsim

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fault is an injected misbehaviour for the requests it matches. Faults are
// tried in the order injected; the first match answers instead of the route.
// A test injects them with Server.Inject; a running cmd/e2bsim takes them on
// its control listener (ControlHandler), as JSON with the field names below.
type Fault struct {
	// Method matches the request method; empty matches any.
	Method string
	// Path matches the URL path exactly, or as a prefix when it ends in "*".
	// Empty matches any.
	Path string
	// Status is the HTTP status to answer (default 500, or 200 for the body
	// faults ResetMidBody and Oversize: a success that goes wrong in its body).
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
	// ResetMidBody sends the status and headers, announcing a longer body
	// than it sends, then the start of the body (Body, or the start of a JSON
	// array), and closes the connection.
	ResetMidBody bool
	// Oversize, when positive, answers a well-formed JSON array of at least
	// this many bytes, for clients that must bound what they read.
	Oversize int
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
func (s *Server) ClearFaults() { s.SetFaults(nil) }

// SetFaults replaces every injected fault with fs, at once: no request
// sees a mix of the old and the new.
func (s *Server) SetFaults(fs []Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
	s.appendFaults(fs)
}

// addFaults appends fs after the faults in force, at once.
func (s *Server) addFaults(fs []Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appendFaults(fs)
}

// appendFaults appends fs; callers hold s.mu.
func (s *Server) appendFaults(fs []Fault) {
	for _, f := range fs {
		s.faults = append(s.faults, &fault{Fault: f})
	}
}

// ActiveFault is a fault in force and how many requests it has answered.
type ActiveFault struct {
	Fault
	Used int
}

// Faults returns the faults in force, in the order they are tried.
func (s *Server) Faults() []ActiveFault {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ActiveFault, 0, len(s.faults))
	for _, f := range s.faults {
		out = append(out, ActiveFault{Fault: f.Fault, Used: f.used})
	}
	return out
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
		if f.ResetMidBody || f.Oversize > 0 {
			status = http.StatusOK
		}
	}
	switch {
	case f.ResetMidBody:
		resetMidBody(w, status, f.Body)
		return
	case f.Oversize > 0:
		writeOversize(w, status, f.Oversize)
		return
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

// resetMidBody announces a body of 100,000 bytes, sends the start of one
// and closes the connection.
func resetMidBody(w http.ResponseWriter, status int, body string) {
	if body == "" {
		body = `[{"sandboxID":"i` + strings.Repeat("a", 500)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(max(100000, 2*len(body))))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	if conn, buf, err := rc.Hijack(); err == nil {
		_ = buf.Flush()
		_ = conn.Close()
		return
	}
	panic(http.ErrAbortHandler) // HTTP/2 or a recorder: abort the stream
}

// writeOversize answers a JSON array of objects of at least n bytes,
// written as it goes (the simulator never holds it in memory).
func writeOversize(w http.ResponseWriter, status, n int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	bw := bufio.NewWriterSize(w, 64<<10)
	item := `{"sandboxID":"` + strings.Repeat("x", 1000) + `"},`
	_, _ = bw.WriteString("[")
	for written := 1; written < n; written += len(item) {
		if _, err := bw.WriteString(item); err != nil {
			return // the client stopped reading
		}
	}
	_, _ = bw.WriteString(`{}]`)
	_ = bw.Flush()
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
