package e2bsim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgate/mcpgate/internal/e2bsim"
)

// control starts the control API of s.s and returns a function that sends
// it a request and returns the status and body.
func (s *sim) control() func(method, body string) (int, string) {
	s.t.Helper()
	srv := httptest.NewServer(s.s.ControlHandler())
	s.t.Cleanup(srv.Close)
	return func(method, body string) (int, string) {
		s.t.Helper()
		return send(s.t, method, srv.URL+e2bsim.ControlPath, body, nil)
	}
}

func send(t *testing.T, method, url, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestControl switches faults while the simulator serves: what the control
// API is told is what the E2B routes answer, at once, and clearing restores
// them.
func TestControl(t *testing.T) {
	s := newSim(t, e2bsim.Options{})
	ctl := s.control()

	if st, body := ctl("PUT", `[{"method":"GET","path":"/v2/sandboxes","status":503,"message":"busy","times":2},
		{"path":"/sandboxes/*","status":429,"retry_after":17}]`); st != 200 {
		t.Fatalf("PUT faults = %d %s", st, body)
	}
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if resp := s.req("GET", "/v2/sandboxes", "", &e); resp.StatusCode != 503 || e.Message != "busy" || e.Code != 503 {
		t.Errorf("GET /v2/sandboxes with a 503 fault = %d %+v", resp.StatusCode, e)
	}
	resp := s.req("GET", "/sandboxes/inone", "", nil)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "17" {
		t.Errorf("GET /sandboxes/… with a 429 fault = %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	st, body := ctl("GET", "")
	var got []map[string]any
	if err := json.Unmarshal([]byte(body), &got); st != 200 || err != nil {
		t.Fatalf("GET faults = %d %s", st, body)
	}
	want := []map[string]any{
		{"method": "GET", "path": "/v2/sandboxes", "status": 503.0, "message": "busy", "times": 2.0, "used": 1.0},
		{"path": "/sandboxes/*", "status": 429.0, "retry_after": "17", "used": 1.0},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("GET faults (-want +got):\n%s", d)
	}

	// The 503 answers twice in all, then the route answers again.
	if got := s.status("GET", "/v2/sandboxes", ""); got != 503 {
		t.Errorf("second GET /v2/sandboxes = %d, want 503", got)
	}
	if got := s.status("GET", "/v2/sandboxes", ""); got != 200 {
		t.Errorf("GET /v2/sandboxes after its fault's times = %d, want 200", got)
	}

	// POST adds after those in force; one object is a list of one.
	if st, body := ctl("POST", `{"path":"/v2/templates","delay":"30ms","status":502}`); st != 200 || strings.Count(body, `"used"`) != 2 {
		t.Fatalf("POST fault = %d %s, want the two faults in force", st, body)
	}
	start := time.Now()
	if got := s.status("GET", "/v2/templates", ""); got != 502 || time.Since(start) < 30*time.Millisecond {
		t.Errorf("GET /v2/templates with a delayed 502 = %d after %s", got, time.Since(start))
	}

	if st, _ := ctl("DELETE", ""); st != http.StatusNoContent {
		t.Errorf("DELETE faults = %d, want 204", st)
	}
	for _, p := range []string{"/v2/sandboxes", "/v2/templates"} {
		if got := s.status("GET", p, ""); got != 200 {
			t.Errorf("GET %s after DELETE = %d, want 200", p, got)
		}
	}
	if st, body := ctl("GET", ""); st != 200 || strings.TrimSpace(body) != "[]" {
		t.Errorf("GET faults after DELETE = %d %s, want []", st, body)
	}
}

// TestControl_refusals: a request the control API cannot take in full
// changes nothing.
func TestControl_refusals(t *testing.T) {
	s := newSim(t, e2bsim.Options{})
	ctl := s.control()
	ctl("PUT", `[{"path":"/v2/sandboxes","status":500}]`)
	for _, body := range []string{
		`[{"path":"/v2/sandboxes","staus":500}]`, // misspelt field
		`[{"delay":"forever"}]`,
		`[{"delay":"11m"}]`,
		`[{"status":99}]`,
		`[{"path":"v2/sandboxes"}]`,
		`[{"method":"get"}]`,
		`[{"reset":true,"oversize":10}]`,
		`[{"oversize":10,"body":"[]"}]`,
		`[{"times":-1}]`,
		`[{"status":502},{"status":1000}]`, // the valid first one is not added either
		`not json`,
	} {
		if st, msg := ctl("PUT", body); st != 400 || !strings.Contains(msg, `"message"`) {
			t.Errorf("PUT %s = %d %s, want 400 with a message", body, st, msg)
		}
	}
	if _, body := ctl("GET", ""); strings.Count(body, `"used"`) != 1 || !strings.Contains(body, `"status":500`) {
		t.Errorf("faults after refused requests = %s, want the one in force before", body)
	}
}

// TestControl_notOnTheAPI: the E2B routes' handler never serves the control
// API, with or without a key: its path answers as any unknown E2B path does,
// and nothing changes.
func TestControl_notOnTheAPI(t *testing.T) {
	s := newSim(t, e2bsim.Options{})
	for _, method := range []string{"GET", "POST", "PUT", "DELETE"} {
		for _, k := range []string{"", key} {
			st, _ := send(t, method, s.url+e2bsim.ControlPath, `[{"status":500}]`, map[string]string{"X-API-Key": k})
			want := http.StatusNotFound
			if k == "" {
				want = http.StatusUnauthorized
			}
			if st != want {
				t.Errorf("%s %s on the E2B listener (key %v) = %d, want %d", method, e2bsim.ControlPath, k != "", st, want)
			}
		}
	}
	if len(s.s.Faults()) != 0 {
		t.Errorf("faults after requests to the E2B listener = %v, want none", s.s.Faults())
	}
	if got := s.status("GET", "/v2/sandboxes", ""); got != 200 {
		t.Errorf("GET /v2/sandboxes = %d, want 200", got)
	}
}

// TestBodyFaults: a body cut by a reset, and an oversized one.
func TestBodyFaults(t *testing.T) {
	s := newSim(t, e2bsim.Options{})
	remove := s.s.Inject(e2bsim.Fault{Path: "/v2/sandboxes", ResetMidBody: true})
	req, _ := http.NewRequest("GET", s.url+"/v2/sandboxes", nil)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.HasPrefix(string(b), `[{"sandboxID":"i`) {
		t.Errorf("reset mid-body = %d, %d bytes, err %v; want 200, a cut body, io.ErrUnexpectedEOF", resp.StatusCode, len(b), err)
	}
	remove()

	s.s.Inject(e2bsim.Fault{Path: "/v2/sandboxes", Oversize: 3 << 20})
	req, _ = http.NewRequest("GET", s.url+"/v2/sandboxes", nil)
	req.Header.Set("X-API-Key", key)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	var items []map[string]string
	if resp.StatusCode != 200 || err != nil || len(b) < 3<<20 || json.Unmarshal(b, &items) != nil {
		t.Errorf("oversize = %d, %d bytes, err %v; want 200 and a JSON list of at least 3 MiB", resp.StatusCode, len(b), err)
	}
}

// TestControlClient: what the Go client sets is what the simulator holds,
// every field of a fault survives the trip, and a refusal is an error.
func TestControlClient(t *testing.T) {
	s := newSim(t, e2bsim.Options{})
	srv := httptest.NewServer(s.s.ControlHandler())
	t.Cleanup(srv.Close)
	c := e2bsim.ControlClient{URL: srv.URL}
	ctx := context.Background()
	all := e2bsim.Fault{Method: "GET", Path: "/v2/*", Status: 503, Body: "{}", Message: "m", RetryAfter: "Wed, 21 Oct 2026 07:28:00 GMT",
		Delay: 1500 * time.Millisecond, ResetMidBody: true, Times: 3}
	if err := c.SetFaults(ctx, all); err != nil {
		t.Fatalf("SetFaults() err = %v", err)
	}
	if err := c.AddFaults(ctx, e2bsim.Fault{Oversize: 10}); err != nil {
		t.Fatalf("AddFaults() err = %v", err)
	}
	got, err := c.Faults(ctx)
	want := []e2bsim.ActiveFault{{Fault: all}, {Fault: e2bsim.Fault{Oversize: 10}}}
	if err != nil || !cmp.Equal(got, want) || !cmp.Equal(s.s.Faults(), want) {
		t.Fatalf("Faults() = %+v, %v; server holds %+v; want %+v", got, err, s.s.Faults(), want)
	}
	if err := c.SetFaults(ctx, e2bsim.Fault{Status: 42}); err == nil || !strings.Contains(err.Error(), "HTTP 400") {
		t.Errorf("SetFaults() of a bad fault err = %v, want the 400", err)
	}
	if err := c.SetFaults(ctx); err != nil || len(s.s.Faults()) != 0 {
		t.Errorf("SetFaults() with none: err %v, %d faults left", err, len(s.s.Faults()))
	}
}
