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
		// infra handlers/sandbox_create.go: only false needs autoPause.
		{"autoPauseMemory true alone", "POST", "/sandboxes", `{"templateID":"base","autoPauseMemory":true}`, 201},
		{"v2 create", "POST", "/v2/sandboxes", `{"templateID":"base"}`, 201},
		{"v2 create timeout zero", "POST", "/v2/sandboxes", `{"templateID":"base","timeout":0}`, 400},
		{"v2 create on an old envd (always secure)", "POST", "/v2/sandboxes", `{"templateID":"worker"}`, 400},
		{"private traffic without secure", "POST", "/sandboxes", `{"templateID":"base","network":{"allowPublicTraffic":false}}`, 400},
		{"domain without deny all", "POST", "/sandboxes", `{"templateID":"base","network":{"allowOut":["example.com"]}}`, 400},
		{"unknown template", "POST", "/sandboxes", `{"templateID":"nope"}`, 404},
		{"unknown tag", "POST", "/sandboxes", `{"templateID":"base:v9"}`, 404},
		{"no ready build", "POST", "/sandboxes", `{"templateID":"broken"}`, 404}, // tag 'default' does not exist
		{"secure on an old envd", "POST", "/sandboxes", `{"templateID":"worker","secure":true}`, 400},
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
		// infra utils/split.go ShortID and shared/pkg/id ValidateSandboxID:
		// lowercase letters and digits of any length are an id, so 404.
		{"short lowercase id", "GET", "/sandboxes/nope", "", 404},
		{"uppercase id", "GET", "/sandboxes/NOPE", "", 400},
		{"unknown sandbox", "GET", "/sandboxes/iaaaaaaaaaaaaaaaaaaaa", "", 404},
		{"legacy id suffix", "GET", "/sandboxes/" + id + "-6532622b", "", 200},
		{"logs bad direction", "GET", "/v2/sandboxes/" + id + "/logs?direction=up", "", 400},
		{"logs bad level", "GET", "/v2/sandboxes/" + id + "/logs?level=fatal", "", 400},
		{"logs limit over max", "GET", "/v2/sandboxes/" + id + "/logs?limit=1001", "", 400},
		{"logs unknown sandbox", "GET", "/v2/sandboxes/iaaaaaaaaaaaaaaaaaaaa/logs", "", 200},
		{"metrics start after end", "GET", "/sandboxes/" + id + "/metrics?start=20&end=10", "", 400},
		{"timeout missing", "POST", "/sandboxes/" + id + "/timeout", `{}`, 400},
		{"connect without timeout", "POST", "/sandboxes/" + id + "/connect", `{}`, 400},
		// infra handlers/sandbox_connect.go: memory is looked at only when
		// resuming.
		{"connect memory false on a running sandbox", "POST", "/sandboxes/" + id + "/connect", `{"timeout":10,"memory":false}`, 200},
		{"v2 connect without a body", "POST", "/v2/sandboxes/" + id + "/connect", "", 200},
		{"v2 connect timeout zero", "POST", "/v2/sandboxes/" + id + "/connect", `{"timeout":0}`, 400},
		{"v2 connect unknown", "POST", "/v2/sandboxes/nope/connect", `{}`, 404},
		{"pause bad body", "POST", "/sandboxes/" + id + "/pause", `{"memory":"yes"}`, 400},
		{"templates limit", "GET", "/v2/templates?limit=500", "", 400},
		{"templates teamID", "GET", "/v2/templates?teamID=other", "", 400},
		{"public template builds", "GET", "/templates/" + s.publicID(), "", 403},
		{"unknown template builds", "GET", "/templates/nope", "", 404},
		{"snapshots limit", "GET", "/snapshots?limit=0", "", 400},
		{"snapshots bad sandbox id", "GET", "/snapshots?sandboxID=not-an-id", "", 400},
		// infra handlers/template_alias.go.
		{"alias of the team", "GET", "/templates/aliases/my-app", "", 200},
		{"alias public (another team's)", "GET", "/templates/aliases/base", "", 403},
		{"alias unknown", "GET", "/templates/aliases/nope", "", 404},
		{"alias bad format", "GET", "/templates/aliases/a%20b", "", 400},
		{"alias other namespace", "GET", "/templates/aliases/other%2Fmy-app", "", 400},
		{"alias unknown tag", "GET", "/templates/aliases/my-app:v9", "", 404},
		// infra handlers/template_tags.go.
		{"tags of the team's template", "GET", "/templates/my-app/tags", "", 200},
		{"tags of a public template", "GET", "/templates/base/tags", "", 403},
		{"tags assign without tags", "POST", "/templates/tags", `{"target":"my-app","tags":[]}`, 400},
		{"tags assign bad tag", "POST", "/templates/tags", `{"target":"my-app","tags":["a b"]}`, 400},
		{"tags assign unknown target", "POST", "/templates/tags", `{"target":"nope","tags":["v1"]}`, 404},
		{"tags assign public target", "POST", "/templates/tags", `{"target":"base","tags":["v1"]}`, 403},
		{"tags delete default", "DELETE", "/templates/tags", `{"name":"my-app","tags":["default"]}`, 400},
		{"tags delete name with a tag", "DELETE", "/templates/tags", `{"name":"my-app:v1","tags":["v1"]}`, 400},
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
	// A foreign private template is "not found" on create, never 403.
	var tmpls []map[string]any
	s.reqKey("e2b_bb", "GET", "/v2/templates", "", &tmpls)
	var e map[string]any
	if got := s.reqKey("e2b_aa", "POST", "/sandboxes", `{"templateID":"`+tmpls[0]["templateID"].(string)+`"}`, &e).StatusCode; got != 404 ||
		!strings.Contains(e["message"].(string), "not found") {
		t.Errorf("other team's template = %d %v, want 404 not found", got, e)
	}

	// A blocked team can still read and kill (infra blocked_team.go), but not
	// create, pause or extend.
	s.s.BlockTeam("e2b_aa", true)
	if got := s.reqKey("e2b_aa", "POST", "/sandboxes/"+id+"/timeout", `{"timeout":60}`, nil).StatusCode; got != 403 {
		t.Errorf("blocked team timeout = %d, want 403", got)
	}
	if got := s.reqKey("e2b_aa", "POST", "/sandboxes", `{"templateID":"base"}`, nil).StatusCode; got != 403 {
		t.Errorf("blocked team create = %d, want 403", got)
	}
	if got := s.reqKey("e2b_aa", "GET", "/sandboxes/"+id, "", nil).StatusCode; got != 200 {
		t.Errorf("blocked team read = %d, want 200", got)
	}
	if got := s.reqKey("e2b_aa", "DELETE", "/sandboxes/"+id, "", nil).StatusCode; got != 204 {
		t.Errorf("blocked team kill = %d, want 204", got)
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
	// A paused sandbox has left the orchestrator's store: 404, as on E2B.
	if got := s.status("POST", path+"/timeout", `{"timeout":100}`); got != 404 {
		t.Errorf("timeout on paused = %d, want 404", got)
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

	// Concurrency limit: 2 running, the third gets 429, without Retry-After
	// (only E2B's rate limiter sends one).
	s.create(`{"templateID":"base","timeout":600}`)
	s.create(`{"templateID":"base","timeout":600}`)
	resp := s.req("POST", "/sandboxes", `{"templateID":"base"}`, nil)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "" {
		t.Errorf("over the limit = %d (Retry-After %q), want 429 without Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
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
				// Equal start times: ids ascending when newest first,
				// descending when oldest first (infra
				// utils/sandboxes_list.go, SortPaginatedSandboxes).
				if prev != "" && (id > prev) != (order == "desc") {
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

func TestTransitions(t *testing.T) {
	s := newSim(t, e2bsim.Options{TransitionDelay: 2 * time.Second})
	id := s.create(`{"templateID":"base","timeout":600}`)["sandboxID"].(string)
	path := "/sandboxes/" + id
	if got := s.status("POST", path+"/pause", ``); got != 204 {
		t.Fatalf("pause = %d", got)
	}
	var d map[string]any
	s.req("GET", path, "", &d)
	if d["state"] != "paused" {
		t.Errorf("pausing sandbox state = %v, want paused (E2B reports pausing as paused)", d["state"])
	}
	var e map[string]any
	if got := s.req("POST", path+"/timeout", `{"timeout":60}`, &e).StatusCode; got != 409 || !strings.Contains(e["message"].(string), "being paused") {
		t.Errorf("timeout while pausing = %d %v, want 409 being paused", got, e)
	}
	if got := s.status("POST", path+"/pause", ``); got != 409 {
		t.Errorf("pause while pausing = %d, want 409", got)
	}
	s.clock.Advance(2 * time.Second)
	if got := s.status("POST", path+"/timeout", `{"timeout":60}`); got != 404 {
		t.Errorf("timeout once paused = %d, want 404", got)
	}
	if got := s.status("POST", path+"/connect", `{"timeout":60}`); got != 201 {
		t.Errorf("connect paused = %d, want 201", got)
	}

	if got := s.status("DELETE", path, ""); got != 204 {
		t.Fatalf("kill = %d", got)
	}
	if got := s.status("GET", path, ""); got != 404 {
		t.Errorf("get while killing = %d, want 404", got)
	}
	if got := s.req("POST", path+"/timeout", `{"timeout":60}`, &e).StatusCode; got != 409 || !strings.Contains(e["message"].(string), "being killed") {
		t.Errorf("timeout while killing = %d %v, want 409 being killed", got, e)
	}
	if got := s.status("POST", path+"/connect", `{"timeout":60}`); got != 409 {
		t.Errorf("connect while killing = %d, want 409", got)
	}
	if got := s.status("DELETE", path, ""); got != 204 {
		t.Errorf("kill while killing = %d, want 204", got)
	}
	var list []any
	s.req("GET", "/v2/sandboxes", "", &list)
	if len(list) != 0 {
		t.Errorf("list while killing = %v, want nothing", list)
	}
	s.clock.Advance(2 * time.Second)
	if got := s.status("DELETE", path, ""); got != 404 {
		t.Errorf("kill once gone = %d, want 404", got)
	}
}

func TestPlanClamp(t *testing.T) {
	s := newSim(t, e2bsim.Options{MaxLifetime: e2bsim.HobbyMaxLifetime})
	if got := s.status("POST", "/sandboxes", `{"templateID":"base","timeout":3601}`); got != 400 {
		t.Errorf("create over the Hobby hour = %d, want 400", got)
	}
	id := s.create(`{"templateID":"base","timeout":3600}`)["sandboxID"].(string)
	s.clock.Advance(50 * time.Minute)
	if got := s.status("POST", "/sandboxes/"+id+"/timeout", `{"timeout":3600}`); got != 204 {
		t.Fatalf("timeout = %d", got)
	}
	var d map[string]any
	s.req("GET", "/sandboxes/"+id, "", &d)
	if d["endAt"] != "2026-03-01T13:00:00Z" {
		t.Errorf("endAt = %v, want start + 1 h (clamped silently)", d["endAt"])
	}
	if got := s.status("POST", "/sandboxes/"+id+"/connect", `{"timeout":3600}`); got != 200 {
		t.Errorf("connect = %d", got)
	}
	s.req("GET", "/sandboxes/"+id, "", &d)
	if d["endAt"] != "2026-03-01T13:00:00Z" {
		t.Errorf("endAt after connect = %v, want still start + 1 h", d["endAt"])
	}
}

func TestSnapshotNames(t *testing.T) {
	s := newSim(t, e2bsim.Options{})
	id := s.create(`{"templateID":"base","timeout":600}`)["sandboxID"].(string)
	var named, bare, tagged map[string]any
	s.req("POST", "/sandboxes/"+id+"/snapshots", `{"name":"snap"}`, &named)
	s.req("POST", "/sandboxes/"+id+"/snapshots", `{}`, &bare)
	s.req("POST", "/sandboxes/"+id+"/snapshots", `{"name":"snap2:v1"}`, &tagged)
	names := named["names"].([]any)
	ns := strings.TrimSuffix(named["snapshotID"].(string), "/snap:default")
	if len(names) != 1 || names[0] != ns+"/snap" || ns == named["snapshotID"] {
		t.Errorf("named snapshot = %v, want snapshotID ns/snap:default and names [ns/snap]", named)
	}
	if !strings.HasSuffix(bare["snapshotID"].(string), ":default") || len(bare["names"].([]any)) != 0 {
		t.Errorf("unnamed snapshot = %v", bare)
	}
	if tagged["snapshotID"] != ns+"/snap2:v1" {
		t.Errorf("tagged snapshot = %v", tagged)
	}
	var e map[string]any
	if got := s.req("GET", "/snapshots?name=other-team/snap", "", &e).StatusCode; got != 400 {
		t.Errorf("list with a foreign namespace = %d %v, want 400", got, e)
	}
	if got := s.status("POST", "/sandboxes/"+id+"/snapshots", `{"name":"other-team/x"}`); got != 400 {
		t.Errorf("create with a foreign namespace = %d, want 400", got)
	}
	var list []map[string]any
	s.req("GET", "/snapshots?name="+ns+"/snap", "", &list)
	if len(list) != 1 {
		t.Errorf("list by ns/name = %v", list)
	}
	// A sandbox can be created from a snapshot ID.
	s.create(`{"templateID":"` + tagged["snapshotID"].(string) + `"}`)
}

func TestAfterTheEnd(t *testing.T) {
	s := newSim(t, e2bsim.Options{})
	id := s.create(`{"templateID":"code-interpreter-v1","timeout":600,"autoPause":true}`)["sandboxID"].(string)
	if got := s.status("POST", "/sandboxes/"+id+"/pause", ``); got != 204 {
		t.Fatal(got)
	}
	var d map[string]any
	s.req("GET", "/sandboxes/"+id, "", &d)
	if d["alias"] != "code-interpreter-v1" {
		t.Errorf("paused alias = %v, want the template's alias kept", d["alias"])
	}
	s.status("POST", "/sandboxes/"+id+"/connect", `{"timeout":60}`)
	s.clock.Advance(time.Minute)
	s.status("DELETE", "/sandboxes/"+id, "")
	s.clock.Advance(24 * time.Hour)
	var logs struct {
		Logs []struct {
			Level string `json:"level"`
		} `json:"logs"`
	}
	s.req("GET", "/v2/sandboxes/"+id+"/logs?limit=1000", "", &logs)
	if len(logs.Logs) == 0 {
		t.Error("no logs a day after the sandbox was killed; E2B keeps them about 7 days")
	}
	for _, l := range logs.Logs {
		if l.Level == "" {
			t.Error("log entry without a level")
		}
	}
	var ms []any
	s.req("GET", "/sandboxes/"+id+"/metrics", "", &ms)
	if len(ms) == 0 {
		t.Error("no metrics after the sandbox was killed")
	}
	s.clock.Advance(7 * 24 * time.Hour)
	s.req("GET", "/v2/sandboxes/"+id+"/logs", "", &logs)
	if len(logs.Logs) != 0 {
		t.Errorf("logs after the retention = %d, want none", len(logs.Logs))
	}
}

func TestSimulatorHeader(t *testing.T) {
	s := newSim(t, e2bsim.Options{})
	for _, k := range []string{key, "not-a-key"} {
		if got := s.reqKey(k, "GET", "/v2/sandboxes", "", nil).Header.Get("X-E2B-Simulator"); got != "mcpgate-e2bsim" {
			t.Errorf("X-E2B-Simulator = %q with key %q", got, k)
		}
	}
}

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

// TestConnectMemoryOnResume follows infra handlers/sandbox_connect.go and
// sandbox_resume.go (resolveFilesystemBoot): memory: false resumes a
// filesystem-only snapshot, and is refused (the feature is off) for one that
// kept its memory; on either route.
func TestConnectMemoryOnResume(t *testing.T) {
	s := newSim(t, e2bsim.Options{})
	for _, route := range []string{"/sandboxes/", "/v2/sandboxes/"} {
		kept := s.create(`{"templateID":"base","timeout":60}`)["sandboxID"].(string)
		fsOnly := s.create(`{"templateID":"base","timeout":60}`)["sandboxID"].(string)
		if s.status("POST", "/sandboxes/"+kept+"/pause", `{}`) != 204 || s.status("POST", "/sandboxes/"+fsOnly+"/pause", `{"memory":false}`) != 204 {
			t.Fatal("pause failed")
		}
		var e struct {
			ErrorCode string `json:"error_code"`
		}
		if resp := s.req("POST", route+kept+"/connect", `{"timeout":60,"memory":false}`, &e); resp.StatusCode != 400 ||
			e.ErrorCode != "sandbox_memory_override_disabled" {
			t.Errorf("%s: connect memory:false on a memory snapshot = %d %q, want 400 sandbox_memory_override_disabled", route, resp.StatusCode, e.ErrorCode)
		}
		if got := s.status("POST", route+fsOnly+"/connect", `{"timeout":60,"memory":false}`); got != 201 {
			t.Errorf("%s: connect memory:false on a filesystem-only snapshot = %d, want 201", route, got)
		}
		if got := s.status("POST", route+kept+"/connect", `{"timeout":60,"memory":true}`); got != 201 {
			t.Errorf("%s: connect memory:true = %d, want 201", route, got)
		}
	}
}

// TestTemplateTags follows infra handlers/template_tags.go and
// template_alias.go: a tag assigned to the default build can be listed,
// checked by alias, created from, and deleted.
func TestTemplateTags(t *testing.T) {
	s := newSim(t, e2bsim.Options{})
	var assigned struct {
		Tags    []string `json:"tags"`
		BuildID string   `json:"buildID"`
	}
	if resp := s.req("POST", "/templates/tags", `{"target":"my-app","tags":["V1","v1","stable"]}`, &assigned); resp.StatusCode != 201 ||
		len(assigned.Tags) != 2 || assigned.BuildID == "" {
		t.Fatalf("assign = %d %+v, want 201 with v1 and stable once each", resp.StatusCode, assigned)
	}
	var tags []struct {
		Tag, BuildID string
	}
	s.req("GET", "/templates/my-app/tags", "", &tags)
	if len(tags) != 3 || tags[0].Tag != "default" || tags[1].BuildID != assigned.BuildID {
		t.Errorf("tags = %+v, want default, v1, stable on %s", tags, assigned.BuildID)
	}
	if got := s.status("GET", "/templates/aliases/my-app:v1", ""); got != 200 {
		t.Errorf("alias my-app:v1 = %d, want 200", got)
	}
	if got := s.status("POST", "/v2/sandboxes", `{"templateID":"my-app:stable"}`); got != 201 {
		t.Errorf("create from my-app:stable = %d, want 201", got)
	}
	if got := s.status("DELETE", "/templates/tags", `{"name":"my-app","tags":["v1"]}`); got != 204 {
		t.Errorf("delete v1 = %d, want 204", got)
	}
	if got := s.status("GET", "/templates/aliases/my-app:v1", ""); got != 404 {
		t.Errorf("alias my-app:v1 after its deletion = %d, want 404", got)
	}
}
