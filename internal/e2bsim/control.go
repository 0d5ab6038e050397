package e2bsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ControlPath is where the control API serves the faults in force.
const ControlPath = "/_sim/faults"

// Bounds of what the control API accepts, so that a typo cannot wedge the
// simulator for hours or have it write gigabytes.
const (
	maxControlBody = 1 << 20
	maxFaultDelay  = 10 * time.Minute
	maxOversize    = 256 << 20
)

// ControlHandler returns the simulator's control API, which switches faults
// while it runs (for tests and demos):
//
//	GET    /_sim/faults  the faults in force, in the order they are tried, each with "used"
//	POST   /_sim/faults  adds a JSON list of faults (or one fault) after those in force
//	PUT    /_sim/faults  replaces every fault with a JSON list, at once
//	DELETE /_sim/faults  removes every fault
//
// A fault is {"method", "path", "status", "body", "message", "retry_after",
// "delay", "reset", "reset_mid_body", "oversize", "times"} as in Fault, with
// "delay" a duration such as "35s". It is no part of E2B's API and never
// reachable through Server's own handler: serve it on a listener of its own
// (cmd/e2bsim --control-listen), never beside the E2B routes. It has no
// authentication; keep that listener on loopback.
func (s *Server) ControlHandler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET "+ControlPath, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Faults())
	})
	m.HandleFunc("POST "+ControlPath, func(w http.ResponseWriter, r *http.Request) {
		fs, ok := readFaults(w, r)
		if !ok {
			return
		}
		s.addFaults(fs)
		writeJSON(w, http.StatusOK, s.Faults())
	})
	m.HandleFunc("PUT "+ControlPath, func(w http.ResponseWriter, r *http.Request) {
		fs, ok := readFaults(w, r)
		if !ok {
			return
		}
		s.SetFaults(fs)
		writeJSON(w, http.StatusOK, s.Faults())
	})
	m.HandleFunc("DELETE "+ControlPath, func(w http.ResponseWriter, r *http.Request) {
		s.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	})
	return m
}

// readFaults decodes and checks a request's faults, answering 400 itself.
func readFaults(w http.ResponseWriter, r *http.Request) ([]Fault, bool) {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxControlBody)); err != nil {
		writeError(w, http.StatusBadRequest, "read body: "+err.Error(), "")
		return nil, false
	}
	body := bytes.TrimSpace(buf.Bytes())
	if len(body) > 0 && body[0] == '{' {
		body = append(append([]byte("["), body...), ']')
	}
	var fs []Fault
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fs); err != nil {
		writeError(w, http.StatusBadRequest, "a JSON list of faults is expected: "+err.Error(), "")
		return nil, false
	}
	var problems []string
	for i, f := range fs {
		if err := f.validate(); err != nil {
			problems = append(problems, fmt.Sprintf("fault %d: %v", i, err))
		}
	}
	if len(problems) > 0 {
		writeError(w, http.StatusBadRequest, strings.Join(problems, "; "), "")
		return nil, false
	}
	return fs, true
}

func (f Fault) validate() error {
	var errs []error
	if f.Method != "" && strings.ToUpper(f.Method) != f.Method {
		errs = append(errs, fmt.Errorf("method %q must be upper case", f.Method))
	}
	if f.Path != "" && !strings.HasPrefix(f.Path, "/") {
		errs = append(errs, fmt.Errorf("path %q must start with /", f.Path))
	}
	if f.Status != 0 && (f.Status < 200 || f.Status > 599) {
		errs = append(errs, fmt.Errorf("status %d is not between 200 and 599", f.Status))
	}
	if f.Delay < 0 || f.Delay > maxFaultDelay {
		errs = append(errs, fmt.Errorf("delay %s is not between 0 and %s", f.Delay, maxFaultDelay))
	}
	if f.Oversize < 0 || f.Oversize > maxOversize {
		errs = append(errs, fmt.Errorf("oversize %d is not between 0 and %d", f.Oversize, maxOversize))
	}
	if f.Times < 0 {
		errs = append(errs, errors.New("times must not be negative"))
	}
	n := 0
	for _, set := range []bool{f.Reset, f.ResetMidBody, f.Oversize > 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		errs = append(errs, errors.New("reset, reset_mid_body and oversize exclude each other"))
	}
	if f.Oversize > 0 && f.Body != "" {
		errs = append(errs, errors.New("oversize writes its own body"))
	}
	return errors.Join(errs...)
}

// faultJSON is a Fault on the control API.
type faultJSON struct {
	Method       string     `json:"method,omitempty"`
	Path         string     `json:"path,omitempty"`
	Status       int        `json:"status,omitempty"`
	Body         string     `json:"body,omitempty"`
	Message      string     `json:"message,omitempty"`
	RetryAfter   retryAfter `json:"retry_after,omitempty"`
	Delay        string     `json:"delay,omitempty"`
	Reset        bool       `json:"reset,omitempty"`
	ResetMidBody bool       `json:"reset_mid_body,omitempty"`
	Oversize     int        `json:"oversize,omitempty"`
	Times        int        `json:"times,omitempty"`
}

// retryAfter takes the header value as a JSON string or a number of seconds.
type retryAfter string

func (v *retryAfter) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		*v = retryAfter(n.String())
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("retry_after must be a string or a number of seconds")
	}
	*v = retryAfter(s)
	return nil
}

// MarshalJSON writes the fault as the control API takes it.
func (f Fault) MarshalJSON() ([]byte, error) {
	j := faultJSON{Method: f.Method, Path: f.Path, Status: f.Status, Body: f.Body, Message: f.Message,
		RetryAfter: retryAfter(f.RetryAfter), Reset: f.Reset, ResetMidBody: f.ResetMidBody, Oversize: f.Oversize, Times: f.Times}
	if f.Delay != 0 {
		j.Delay = f.Delay.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads a fault as the control API takes it; unknown fields
// are refused, so that a misspelt one is not silently a different fault.
func (f *Fault) UnmarshalJSON(b []byte) error {
	var j faultJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return err
	}
	var delay time.Duration
	if j.Delay != "" {
		d, err := time.ParseDuration(j.Delay)
		if err != nil {
			return fmt.Errorf("delay %q is not a duration such as 35s", j.Delay)
		}
		delay = d
	}
	*f = Fault{Method: j.Method, Path: j.Path, Status: j.Status, Body: j.Body, Message: j.Message, RetryAfter: string(j.RetryAfter),
		Delay: delay, Reset: j.Reset, ResetMidBody: j.ResetMidBody, Oversize: j.Oversize, Times: j.Times}
	return nil
}

// MarshalJSON writes the fault with "used", the requests it has answered.
func (a ActiveFault) MarshalJSON() ([]byte, error) {
	b, err := a.Fault.MarshalJSON()
	if err != nil {
		return nil, err
	}
	used := []byte(`"used":` + strconv.Itoa(a.Used))
	if len(b) > 2 {
		used = append(used, ',')
	}
	return append(append([]byte("{"), used...), b[1:]...), nil
}
