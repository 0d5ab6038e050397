package e2bsim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpgate/mcpgate/internal/e2bsim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const key = "e2b_00ff"

type sim struct {
	t     *testing.T
	s     *e2bsim.Server
	url   string
	clock *e2bsim.ManualClock
}

func newSim(t *testing.T, opts e2bsim.Options) *sim {
	t.Helper()
	clock := e2bsim.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	opts.Now = clock.Now
	s := e2bsim.New(opts)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &sim{t: t, s: s, url: srv.URL, clock: clock}
}

// req sends a request and decodes a JSON answer into out (when non-nil).
func (s *sim) req(method, path, body string, out any) *http.Response {
	s.t.Helper()
	return s.reqKey(key, method, path, body, out)
}

func (s *sim) reqKey(k, method, path, body string, out any) *http.Response {
	s.t.Helper()
	r, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	r.Header.Set("X-API-Key", k)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp
}

func (s *sim) create(body string) map[string]any {
	s.t.Helper()
	var out map[string]any
	if resp := s.req("POST", "/sandboxes", body, &out); resp.StatusCode != 201 {
		s.t.Fatalf("create %s: status %d %v", body, resp.StatusCode, out)
	}
	return out
}

func (s *sim) status(method, path, body string) int {
	s.t.Helper()
	return s.req(method, path, body, nil).StatusCode
}

func TestValidation(t *testing.T) {
	s := newSim(t, e2bsim.Options{})
	id := s.create(`{"templateID":"base"}`)["sandboxID"].(string)
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"missing templateID", "POST", "/sandboxes", `{"timeout":10}`, 400},
		{"bad body", "POST", "/sandboxes", `{"templateID":`, 400},
		{"timeout negative", "POST", "/sandboxes", `{"templateID":"base","timeout":-1}`, 400},
		{"timeout over max", "POST", "/sandboxes", `{"templateID":"base","timeout":90000}`, 400},
		{"autoPauseMemory alone", "POST", "/sandboxes", `{"templateID":"base","autoPauseMemory":false}`, 400},
		{"private traffic without secure", "POST", "/sandboxes", `{"templateID":"base","network":{"allowPublicTraffic":false}}`, 400},
		{"domain without deny all", "POST", "/sandboxes", `{"templateID":"base","network":{"allowOut":["example.com"]}}`, 400},
		{"unknown template", "POST", "/sandboxes", `{"templateID":"nope"}`, 404},
		{"unknown tag", "POST", "/sandboxes", `{"templateID":"base:v9"}`, 404},
		{"no ready build", "POST", "/sandboxes", `{"templateID":"broken"}`, 400},
		{"unknown state", "GET", "/v2/sandboxes?state=dead", "", 400},
		{"repeated state", "GET", "/v2/sandboxes?state=running&state=paused", "", 400},
		{"comma states", "GET", "/v2/sandboxes?state=running,paused", "", 200},
		{"limit over max", "GET", "/v2/sandboxes?limit=101", "", 400},
		{"limit zero", "GET", "/v2/sandboxes?limit=0", "", 400},
		{"bad order", "GET", "/v2/sandboxes?order=up", "", 400},
		{"bad token", "GET", "/v2/sandboxes?nextToken=xyz", "", 400},
		{"tagged template filter", "GET", "/v2/sandboxes?template=base:v1", "", 400},
		{"bad startedAfter", "GET", "/v2/sandboxes?startedAfter=yesterday", "", 400},
		{"bad metadata", "GET", "/v2/sandboxes?metadata=novalue", "", 400},
		{"bad sandbox id", "GET", "/sandboxes/not-an-id", "", 400},
		{"unknown sandbox", "GET", "/sandboxes/iaaaaaaaaaaaaaaaaaaaa", "", 404},
		{"legacy id suffix", "GET", "/sandboxes/" + id + "-6532622b", "", 200},
		{"logs bad direction", "GET", "/v2/sandboxes/" + id + "/logs?direction=up", "", 400},
		{"logs bad level", "GET", "/v2/sandboxes/" + id + "/logs?level=fatal", "", 400},
		{"logs limit over max", "GET", "/v2/sandboxes/" + id + "/logs?limit=1001", "", 400},
		{"logs unknown sandbox", "GET", "/v2/sandboxes/iaaaaaaaaaaaaaaaaaaaa/logs", "", 200},
		{"metrics start after end", "GET", "/sandboxes/" + id + "/metrics?start=20&end=10", "", 400},
		{"timeout missing", "POST", "/sandboxes/" + id + "/timeout", `{}`, 400},
		{"connect without timeout", "POST", "/sandboxes/" + id + "/connect", `{}`, 400},
		{"connect with memory", "POST", "/sandboxes/" + id + "/connect", `{"timeout":10,"memory":false}`, 400},
		{"pause bad body", "POST", "/sandboxes/" + id + "/pause", `{"memory":"yes"}`, 400},
		{"templates limit", "GET", "/v2/templates?limit=500", "", 400},
		{"templates teamID", "GET", "/v2/templates?teamID=other", "", 400},
		{"public template builds", "GET", "/templates/" + s.publicID(), "", 403},
		{"unknown template builds", "GET", "/templates/nope", "", 404},
		{"snapshots limit", "GET", "/snapshots?limit=0", "", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var raw json.RawMessage
			resp := s.req(tt.method, tt.path, tt.body, &raw)
			if resp.StatusCode != tt.want {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, resp.StatusCode, raw, tt.want)
			}
			var e struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			if tt.want >= 400 && (json.Unmarshal(raw, &e) != nil || e.Code != tt.want || e.Message == "") {
				t.Errorf("error body = %+v, want E2B's shape with code %d", e, tt.want)
			}
		})
	}
}

func (s *sim) publicID() string {
	var out struct {
		Templates []struct {
			ID string `json:"id"`
		} `json:"templates"`
	}
	s.req("GET", "/templates/defaults", "", &out)
	return out.Templates[0].ID
}

func TestAuth(t *testing.T) {
	s := newSim(t, e2bsim.Options{TeamKeys: []string{"e2b_aa", "e2b_bb"}})
	if got := s.reqKey("e2b_cc", "GET", "/v2/sandboxes", "", nil).StatusCode; got != 401 {
		t.Errorf("unknown key = %d, want 401", got)
	}
	if got := s.reqKey("", "GET", "/templates/defaults", "", nil).StatusCode; got != 401 {
		t.Errorf("no key = %d, want 401", got)
	}
	var sb map[string]any
	s.reqKey("e2b_aa", "POST", "/sandboxes", `{"templateID":"base"}`, &sb)
	id := sb["sandboxID"].(string)
	// Another team sees nothing, and 404 rather than 403.
	if got := s.reqKey("e2b_bb", "GET", "/sandboxes/"+id, "", nil).StatusCode; got != 404 {
		t.Errorf("other team's sandbox = %d, want 404", got)
	}
	var list []any
	s.reqKey("e2b_bb", "GET", "/v2/sandboxes", "", &list)
	if len(list) != 0 {
		t.Errorf("other team lists %d sandboxes", len(list))
	}
	s.s.BlockTeam("e2b_aa", true)
	if got := s.reqKey("e2b_aa", "DELETE", "/sandboxes/"+id, "", nil).StatusCode; got != 403 {
		t.Errorf("blocked team kill = %d, want 403", got)
	}
	if got := s.reqKey("e2b_aa", "GET", "/sandboxes/"+id, "", nil).StatusCode; got != 200 {
		t.Errorf("blocked team read = %d, want 200", got)
	}

	open := newSim(t, e2bsim.Options{})
	if got := open.reqKey("e2b_123abc", "GET", "/v2/sandboxes", "", nil).StatusCode; got != 200 {
		t.Errorf("open mode, good key = %d", got)
	}
	if got := open.reqKey("sk_e2b_123", "GET", "/v2/sandboxes", "", nil).StatusCode; got != 401 {
		t.Errorf("open mode, bad key = %d", got)
	}
}

func TestStateMachine(t *testing.T) {
	s := newSim(t, e2bsim.Options{MaxRunning: 2})
	sb := s.create(`{"templateID":"base","timeout":60,"secure":true}`)
	id := sb["sandboxID"].(string)
	if sb["envdAccessToken"] == nil {
		t.Error("secure create without envdAccessToken")
	}
	path := "/sandboxes/" + id

	// Connect on a running sandbox: 200, extends only.
	if got := s.status("POST", path+"/connect", `{"timeout":10}`); got != 200 {
		t.Errorf("connect running = %d, want 200", got)
	}
	var d map[string]any
	s.req("GET", path, "", &d)
	if d["endAt"] != "2026-03-01T12:01:00Z" {
		t.Errorf("connect shortened endAt to %v", d["endAt"])
	}
	if got := s.status("POST", path+"/pause", ``); got != 204 {
		t.Errorf("pause = %d", got)
	}
	if got := s.status("POST", path+"/pause", `{"memory":true}`); got != 409 {
		t.Errorf("pause paused = %d, want 409", got)
	}
	if got := s.status("POST", path+"/timeout", `{"timeout":100}`); got != 409 {
		t.Errorf("timeout on paused = %d, want 409", got)
	}
	s.req("GET", path, "", &d)
	if d["state"] != "paused" || d["endAt"] != "2026-03-01T12:00:00Z" || d["envdAccessToken"] == nil {
		t.Errorf("paused detail = %v", d)
	}
	s.clock.Advance(time.Hour) // paused sandboxes do not expire
	if got := s.status("POST", path+"/connect", `{"timeout":30}`); got != 201 {
		t.Errorf("connect paused = %d, want 201", got)
	}
	s.clock.Advance(31 * time.Second) // expired without autoPause: gone
	if got := s.status("GET", path, ""); got != 404 {
		t.Errorf("expired = %d, want 404", got)
	}
	if got := s.status("DELETE", path, ""); got != 404 {
		t.Errorf("kill expired = %d, want 404", got)
	}

	// Auto-pause at expiry, with the filesystem-only option.
	ap := s.create(`{"templateID":"base","timeout":10,"autoPause":true,"autoPauseMemory":false}`)["sandboxID"].(string)
	s.clock.Advance(10 * time.Second)
	s.req("GET", "/sandboxes/"+ap, "", &d)
	if d["state"] != "paused" || d["lifecycle"].(map[string]any)["onTimeout"] != "pause" {
		t.Errorf("auto-paused = %v", d)
	}

	// timeout 0 ends a sandbox at once.
	gone := s.create(`{"templateID":"base"}`)["sandboxID"].(string)
	if got := s.status("POST", "/sandboxes/"+gone+"/timeout", `{"timeout":0}`); got != 204 {
		t.Errorf("timeout 0 = %d", got)
	}
	if got := s.status("GET", "/sandboxes/"+gone, ""); got != 404 {
		t.Errorf("after timeout 0 = %d, want 404", got)
	}

	// Concurrency limit: 2 running, the third gets 429 with Retry-After.
	s.create(`{"templateID":"base","timeout":600}`)
	s.create(`{"templateID":"base","timeout":600}`)
	resp := s.req("POST", "/sandboxes", `{"templateID":"base"}`, nil)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("over the limit = %d (Retry-After %q), want 429", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if got := s.status("POST", "/sandboxes/"+ap+"/connect", `{"timeout":30}`); got != 429 {
		t.Errorf("resume over the limit = %d, want 429", got)
	}
	if got := s.status("DELETE", "/sandboxes/"+ap, ""); got != 204 {
		t.Errorf("kill paused = %d, want 204", got)
	}
}

func TestListPaging(t *testing.T) {
	s := newSim(t, e2bsim.Options{MaxRunning: 50})
	for range 25 {
		s.create(`{"templateID":"base","timeout":600,"metadata":{"app":"a b"}}`)
	}
	for _, order := range []string{"desc", "asc"} {
		seen := map[string]bool{}
		token := ""
		var prev string
		for pages := 0; pages < 10; pages++ {
			var list []map[string]any
			resp := s.req("GET", "/v2/sandboxes?limit=10&order="+order+"&metadata=app%3Da%2520b&nextToken="+token, "", &list)
			if resp.Header.Get("X-Total-Running") != "25" {
				t.Errorf("X-Total-Running = %q", resp.Header.Get("X-Total-Running"))
			}
			for _, sb := range list {
				id := sb["sandboxID"].(string)
				if seen[id] {
					t.Errorf("%s: %s listed twice", order, id)
				}
				seen[id] = true
				if prev != "" && (id < prev) != (order == "desc") {
					t.Errorf("%s: %s after %s", order, id, prev)
				}
				prev = id
			}
			if token = resp.Header.Get("X-Next-Token"); token == "" {
				break
			}
		}
		if len(seen) != 25 {
			t.Errorf("%s: %d sandboxes over all pages, want 25", order, len(seen))
		}
	}
	// A token is bound to its order.
	resp := s.req("GET", "/v2/sandboxes?limit=10", "", nil)
	if got := s.status("GET", "/v2/sandboxes?order=asc&nextToken="+resp.Header.Get("X-Next-Token"), ""); got != 400 {
		t.Errorf("token reused with the other order = %d, want 400", got)
	}
}

func TestFaults(t *testing.T) {
	s := newSim(t, e2bsim.Options{})
	remove := s.s.Inject(e2bsim.Fault{Path: "/v2/*", Status: 502, Times: 2})
	defer remove()
	for i, want := range []int{502, 502, 200} {
		if got := s.status("GET", "/v2/sandboxes", ""); got != want {
			t.Errorf("request %d = %d, want %d", i, got, want)
		}
	}
	s.s.SetFailRate(1)
	if got := s.status("GET", "/v2/sandboxes", ""); got != 503 {
		t.Errorf("fail rate 1 = %d, want 503", got)
	}
	s.s.SetFailRate(0)
	s.s.SetLatency(20 * time.Millisecond)
	start := time.Now()
	s.status("GET", "/v2/sandboxes", "")
	if time.Since(start) < 20*time.Millisecond {
		t.Error("latency not applied")
	}
}

func TestTelemetry(t *testing.T) {
	s := newSim(t, e2bsim.Options{})
	idle := s.create(`{"templateID":"base","timeout":3600,"metadata":{"e2bsim_cpu":"1"}}`)["sandboxID"].(string)
	s.clock.Advance(10 * time.Minute)
	var ms []struct {
		TimestampUnix int64   `json:"timestampUnix"`
		CPUUsedPct    float64 `json:"cpuUsedPct"`
	}
	s.req("GET", "/sandboxes/"+idle+"/metrics", "", &ms)
	if len(ms) != 121 {
		t.Fatalf("metrics over 10 min = %d, want 121 (5 s step)", len(ms))
	}
	for _, m := range ms {
		if m.CPUUsedPct >= 1.21 || m.CPUUsedPct < 0.79 {
			t.Errorf("idle sandbox sample %v outside 1%% ± 20%%", m.CPUUsedPct)
		}
	}
	var logs struct {
		Logs []struct {
			Timestamp time.Time `json:"timestamp"`
			Level     string    `json:"level"`
		} `json:"logs"`
	}
	s.req("GET", "/v2/sandboxes/"+idle+"/logs?direction=forward&limit=5&level=warn", "", &logs)
	if len(logs.Logs) != 5 || !logs.Logs[0].Timestamp.Before(logs.Logs[1].Timestamp) {
		t.Errorf("forward logs = %+v", logs.Logs)
	}
	for _, l := range logs.Logs {
		if l.Level != "warn" && l.Level != "error" {
			t.Errorf("level warn let through %q", l.Level)
		}
	}
}
