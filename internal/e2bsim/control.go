package e2bsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	m.HandleFunc("POST "+ControlPath, s.changeFaults(s.addFaults))
	m.HandleFunc("PUT "+ControlPath, s.changeFaults(s.SetFaults))
	m.HandleFunc("DELETE "+ControlPath, func(w http.ResponseWriter, r *http.Request) {
		s.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	})
	return m
}

// changeFaults is a handler that gives the request's faults to change and
// answers the faults then in force.
func (s *Server) changeFaults(change func([]Fault)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fs, ok := readFaults(w, r)
		if !ok {
			return
		}
		change(fs)
		writeJSON(w, http.StatusOK, s.Faults())
	}
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
	if err := strictDecode(body, &fs); err != nil {
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

func faultJSONOf(f Fault) faultJSON {
	j := faultJSON{Method: f.Method, Path: f.Path, Status: f.Status, Body: f.Body, Message: f.Message,
		RetryAfter: retryAfter(f.RetryAfter), Reset: f.Reset, ResetMidBody: f.ResetMidBody, Oversize: f.Oversize, Times: f.Times}
	if f.Delay != 0 {
		j.Delay = f.Delay.String()
	}
	return j
}

func (j faultJSON) fault() (Fault, error) {
	var delay time.Duration
	if j.Delay != "" {
		d, err := time.ParseDuration(j.Delay)
		if err != nil {
			return Fault{}, fmt.Errorf("delay %q is not a duration such as 35s", j.Delay)
		}
		delay = d
	}
	return Fault{Method: j.Method, Path: j.Path, Status: j.Status, Body: j.Body, Message: j.Message, RetryAfter: string(j.RetryAfter),
		Delay: delay, Reset: j.Reset, ResetMidBody: j.ResetMidBody, Oversize: j.Oversize, Times: j.Times}, nil
}

// strictDecode decodes b into v refusing unknown fields, so that a
// misspelt one is not silently a different fault.
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// MarshalJSON writes the fault as the control API takes it.
func (f Fault) MarshalJSON() ([]byte, error) { return json.Marshal(faultJSONOf(f)) }

// UnmarshalJSON reads a fault as the control API takes it.
func (f *Fault) UnmarshalJSON(b []byte) error {
	var j faultJSON
	if err := strictDecode(b, &j); err != nil {
		return err
	}
	var err error
	*f, err = j.fault()
	return err
}

// activeFaultJSON is an ActiveFault on the control API: the fault's fields
// and "used".
type activeFaultJSON struct {
	faultJSON
	Used int `json:"used"`
}

// MarshalJSON writes the fault with "used", the requests it has answered.
func (a ActiveFault) MarshalJSON() ([]byte, error) {
	return json.Marshal(activeFaultJSON{faultJSON: faultJSONOf(a.Fault), Used: a.Used})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (a *ActiveFault) UnmarshalJSON(b []byte) error {
	var j activeFaultJSON
	if err := strictDecode(b, &j); err != nil {
		return err
	}
	f, err := j.fault()
	*a = ActiveFault{Fault: f, Used: j.Used}
	return err
}

// ControlClient drives the control API of a running simulator (cmd/e2bsim
// --control-listen) from Go, for tests and demos.
type ControlClient struct {
	// URL is the control listener's base URL, such as http://127.0.0.1:3002.
	URL string
	// HTTPClient defaults to a client with a 10 s timeout.
	HTTPClient *http.Client
}

// SetFaults replaces the simulator's faults with fs, at once; with none it
// removes them all.
func (c ControlClient) SetFaults(ctx context.Context, fs ...Fault) error {
	if len(fs) == 0 {
		return c.do(ctx, http.MethodDelete, nil, nil)
	}
	return c.do(ctx, http.MethodPut, fs, nil)
}

// AddFaults adds fs after the faults in force.
func (c ControlClient) AddFaults(ctx context.Context, fs ...Fault) error {
	return c.do(ctx, http.MethodPost, fs, nil)
}

// Faults returns the faults in force.
func (c ControlClient) Faults(ctx context.Context) ([]ActiveFault, error) {
	var out []ActiveFault
	err := c.do(ctx, http.MethodGet, nil, &out)
	return out, err
}

func (c ControlClient) do(ctx context.Context, method string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+ControlPath, body)
	if err != nil {
		return err
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("e2bsim control API: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxControlBody))
	if err != nil {
		return fmt.Errorf("e2bsim control API: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("e2bsim control API: %s %s: HTTP %d: %s", method, ControlPath, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}
