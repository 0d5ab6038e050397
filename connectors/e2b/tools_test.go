package e2b_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
)

func TestTools_names(t *testing.T) {
	want := []string{"e2b_list_default_templates", "e2b_list_templates", "e2b_list_template_builds", "e2b_create_sandbox",
		"e2b_list_sandboxes", "e2b_get_sandbox", "e2b_get_sandbox_logs", "e2b_get_sandbox_metrics", "e2b_set_sandbox_timeout",
		"e2b_pause_sandbox", "e2b_resume_sandbox", "e2b_list_snapshots", "e2b_find_idle_sandboxes", "e2b_kill_sandbox"}
	tools := e2b.New(e2b.Options{}).Tools()
	if len(tools) != len(want) {
		t.Fatalf("len(Tools()) = %d, want %d", len(tools), len(want))
	}
	for i, tl := range tools {
		if tl.Name != want[i] {
			t.Errorf("Tools()[%d] = %s, want %s", i, tl.Name, want[i])
		}
		if tl.Title == "" || tl.Description == "" {
			t.Errorf("%s: missing title or description", tl.Name)
		}
		kill := tl.Name == e2b.ToolKillSandbox
		if tl.DefaultEnabled == kill || (tl.DefaultApprovalMode() != mcpgate.ApprovalNone) != kill {
			t.Errorf("%s: DefaultEnabled = %v, DefaultApprovalMode = %v", tl.Name, tl.DefaultEnabled, tl.DefaultApprovalMode())
		}
		money := map[string]bool{e2b.ToolCreateSandbox: true, e2b.ToolSetSandboxTimeout: true, e2b.ToolResumeSandbox: true}[tl.Name]
		if tl.CostsMoney != money {
			t.Errorf("%s: CostsMoney = %v, want %v", tl.Name, tl.CostsMoney, money)
		}
		if tl.Annotations.ReadOnly && (tl.Annotations.Destructive || tl.CostsMoney) {
			t.Errorf("%s: read-only tools can be neither destructive nor billed", tl.Name)
		}
	}
}

func TestTools_templates(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})

	defs := e.mustCall(e2b.ToolListDefaultTemplates, nil)["templates"].([]any)
	if len(defs) != 3 {
		t.Fatalf("default templates = %d, want 3", len(defs))
	}
	base := defs[0].(map[string]any)
	if base["names"].([]any)[0] != "e2b/base" || base["cpu_count"].(float64) != 2 || base["memory_mb"].(float64) != 512 {
		t.Errorf("base template = %v", base)
	}

	// Paging to the end with limit 1: three templates, newest first.
	ids := itemIDs(e.pages(e2b.ToolListTemplates, map[string]any{"limit": 1}), "data", "template_id")
	if len(ids) != 3 {
		t.Fatalf("templates over all pages = %v, want 3", ids)
	}
	all := e.mustCall(e2b.ToolListTemplates, nil)["data"].([]any)
	broken := all[0].(map[string]any) // newest: the failed one, with E2B's zero values
	if broken["build_status"] != "error" || broken["build_id"] != nil || broken["cpu_count"].(float64) != 0 {
		t.Errorf("template without a ready build = %v", broken)
	}

	myApp := all[2].(map[string]any)["template_id"].(string)
	builds := itemIDs(e.pages(e2b.ToolListTemplateBuilds, map[string]any{"template_id": myApp, "limit": 1}), "builds", "build_id")
	if len(builds) != 3 {
		t.Errorf("builds over all pages = %v, want 3", builds)
	}

	_, err := e.call(e2b.ToolListTemplateBuilds, map[string]any{"template_id": base["template_id"]})
	wantCode(t, err, mcpgate.EForbidden)
	_, err = e.call(e2b.ToolListTemplateBuilds, map[string]any{"template_id": "nosuchtemplate"})
	wantCode(t, err, mcpgate.ENotFound)
}

func TestTools_sandboxLifecycle(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	id := e.create(map[string]any{"metadata": map[string]string{"user": "abc", "app": "prod"}, "env_vars": map[string]string{"TOKEN": "env-s3cr3t"}})

	got := e.mustCall(e2b.ToolGetSandbox, map[string]any{"sandbox_id": id})
	if got["state"] != "running" || got["end_at"] != epoch.Add(300*time.Second).Format(time.RFC3339Nano) {
		t.Errorf("get = %v, want running until +300 s", got)
	}
	if got["host"] != "<port>-"+id+".e2b.app" {
		t.Errorf("host = %v", got["host"])
	}

	out := e.mustCall(e2b.ToolSetSandboxTimeout, map[string]any{"sandbox_id": id, "timeout": 3600})
	if out["end_at"] != epoch.Add(time.Hour).Format(time.RFC3339) {
		t.Errorf("set timeout end_at = %v", out["end_at"])
	}
	e.mustCall(e2b.ToolPauseSandbox, map[string]any{"sandbox_id": id}) // memory defaults to true
	got = e.mustCall(e2b.ToolGetSandbox, map[string]any{"sandbox_id": id})
	if got["state"] != "paused" || got["paused_at"] != epoch.Format(time.RFC3339Nano) || got["end_at"] != nil {
		t.Errorf("after pause = %v, want paused_at and no end_at", got)
	}
	_, err := e.call(e2b.ToolPauseSandbox, map[string]any{"sandbox_id": id})
	wantCode(t, err, mcpgate.EConflict)
	_, err = e.call(e2b.ToolSetSandboxTimeout, map[string]any{"sandbox_id": id, "timeout": 600})
	wantCode(t, err, mcpgate.EConflict)

	e.clock.Advance(time.Minute)
	res := e.mustCall(e2b.ToolResumeSandbox, map[string]any{"sandbox_id": id})
	if res["action"] != "resumed" || res["timeout_seconds"].(float64) != 300 {
		t.Errorf("resume = %v", res)
	}
	res = e.mustCall(e2b.ToolResumeSandbox, map[string]any{"sandbox_id": id, "timeout": 60})
	if res["action"] != "extended" {
		t.Errorf("resume of a running sandbox = %v, want extended", res)
	}
	got = e.mustCall(e2b.ToolGetSandbox, map[string]any{"sandbox_id": id})
	if got["end_at"] != epoch.Add(time.Minute+300*time.Second).Format(time.RFC3339Nano) {
		t.Errorf("connect shortened the sandbox: end_at = %v", got["end_at"])
	}

	if out := e.mustCall(e2b.ToolKillSandbox, map[string]any{"sandbox_id": id}); out["killed"] != true {
		t.Errorf("kill = %v", out)
	}
	_, err = e.call(e2b.ToolKillSandbox, map[string]any{"sandbox_id": id})
	wantCode(t, err, mcpgate.ENotFound)
	_, err = e.call(e2b.ToolGetSandbox, map[string]any{"sandbox_id": id})
	wantCode(t, err, mcpgate.ENotFound)
	if !strings.Contains(mcpgate.ErrorMessage(err), "expired") {
		t.Errorf("404 message = %q, want it to explain expiry", mcpgate.ErrorMessage(err))
	}
}

func TestTools_createOptions(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	out := e.mustCall(e2b.ToolCreateSandbox, map[string]any{"template_id": "code-interpreter-v1", "timeout": 60,
		"auto_pause": true, "allow_internet_access": false})
	if out["on_timeout"] != "pause" || out["alias"] != "code-interpreter-v1" {
		t.Errorf("create = %v", out)
	}
	got := e.mustCall(e2b.ToolGetSandbox, map[string]any{"sandbox_id": out["sandbox_id"]})
	if got["allow_internet_access"] != false || got["lifecycle"].(map[string]any)["onTimeout"] != "pause" {
		t.Errorf("get = %v", got)
	}
	// Auto-pause at the timeout: the sandbox is paused, not gone.
	e.clock.Advance(61 * time.Second)
	got = e.mustCall(e2b.ToolGetSandbox, map[string]any{"sandbox_id": out["sandbox_id"]})
	if got["state"] != "paused" {
		t.Errorf("after timeout with auto_pause: state = %v", got["state"])
	}

	_, err := e.call(e2b.ToolCreateSandbox, map[string]any{"template_id": "nope"})
	wantCode(t, err, mcpgate.ENotFound)
}

func TestTools_listSandboxes(t *testing.T) {
	e := newEnv(t, e2bsim.Options{MaxRunning: 100})
	for i := range 7 {
		e.create(map[string]any{"metadata": map[string]string{"user": fmt.Sprint("u", i%2), "app": "prod"}})
		e.clock.Advance(time.Second)
	}
	paused := e.create(map[string]any{"metadata": map[string]string{"user": "u0", "app": "prod"}})
	e.mustCall(e2b.ToolPauseSandbox, map[string]any{"sandbox_id": paused, "memory": false})

	out := e.mustCall(e2b.ToolListSandboxes, nil)
	if n := len(out["data"].([]any)); n != 8 || out["total_running"].(float64) != 7 || out["next_token"] != nil {
		t.Errorf("list = %d items, total_running %v, next_token %v", n, out["total_running"], out["next_token"])
	}
	first := out["data"].([]any)[0].(map[string]any)
	if first["sandbox_id"] != paused || first["paused_at"] == nil {
		t.Errorf("newest first = %v, want the paused one with paused_at", first)
	}

	// Paging to the end, filtered by metadata.
	pages := e.pages(e2b.ToolListSandboxes, map[string]any{"limit": 2, "metadata": "user=u0&app=prod", "state": "running"})
	for _, out := range pages {
		if out["total_running"].(float64) != 4 {
			t.Errorf("total_running = %v, want 4", out["total_running"])
		}
	}
	seen := map[string]bool{}
	for _, id := range itemIDs(pages, "data", "sandbox_id") {
		seen[id] = true
	}
	if len(seen) != 4 {
		t.Errorf("sandboxes over all pages = %d, want 4", len(seen))
	}

	out = e.mustCall(e2b.ToolListSandboxes, map[string]any{"state": "paused"})
	if len(out["data"].([]any)) != 1 || out["total_running"] != nil {
		t.Errorf("paused only = %v, want one and no total_running", out)
	}
	out = e.mustCall(e2b.ToolListSandboxes, map[string]any{"started_after": epoch.Add(5 * time.Second).Format(time.RFC3339)})
	if n := len(out["data"].([]any)); n != 3 {
		t.Errorf("started_after = %d sandboxes, want 3", n)
	}
	out = e.mustCall(e2b.ToolListSandboxes, map[string]any{"template": "desktop"})
	if n := len(out["data"].([]any)); n != 0 {
		t.Errorf("template filter = %d sandboxes, want 0", n)
	}
	_, err := e.call(e2b.ToolListSandboxes, map[string]any{"next_token": "garbage"})
	wantCode(t, err, mcpgate.EInvalid)
	if !strings.Contains(mcpgate.ErrorMessage(err), "next_token") {
		t.Errorf("bad token message = %q, want it to name next_token", mcpgate.ErrorMessage(err))
	}
	_, err = e.call(e2b.ToolListSandboxes, map[string]any{"started_after": "yesterday"})
	wantCode(t, err, mcpgate.EInvalid)
}

func TestTools_logs(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	id := e.create(map[string]any{"timeout": 3600})
	e.clock.Advance(10 * time.Minute) // 61 entries, one per 10 s

	out := e.mustCall(e2b.ToolGetSandboxLogs, map[string]any{"sandbox_id": id})
	logs := out["logs"].([]any)
	if len(logs) != 61 || out["next_cursor"] != nil {
		t.Fatalf("logs = %d, next_cursor %v; want 61 and none", len(logs), out["next_cursor"])
	}
	if logs[0].(map[string]any)["timestamp"] != epoch.Add(10*time.Minute).Format(time.RFC3339Nano) {
		t.Errorf("first entry = %v, want the newest (backward by default)", logs[0])
	}

	// Page backward to the start, 25 at a time.
	var total int
	args := map[string]any{"sandbox_id": id, "limit": 25}
	for {
		out := e.mustCall(e2b.ToolGetSandboxLogs, args)
		total += len(out["logs"].([]any))
		c, ok := out["next_cursor"]
		if !ok {
			break
		}
		args["cursor"] = c
	}
	if total != 61 {
		t.Errorf("entries over all pages = %d, want 61", total)
	}

	out = e.mustCall(e2b.ToolGetSandboxLogs, map[string]any{"sandbox_id": id, "direction": "forward",
		"cursor": epoch.UnixMilli(), "level": "error", "limit": 3})
	for _, l := range out["logs"].([]any) {
		if l.(map[string]any)["level"] != "error" {
			t.Errorf("level filter let through %v", l)
		}
	}
	out = e.mustCall(e2b.ToolGetSandboxLogs, map[string]any{"sandbox_id": id, "search": "#42)"})
	if n := len(out["logs"].([]any)); n != 1 {
		t.Errorf("search = %d entries, want 1", n)
	}
}

func TestTools_metrics(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	id := e.create(map[string]any{"timeout": 3600, "metadata": map[string]string{e2bsim.CPUMetadataKey: "50"}})
	e.clock.Advance(time.Minute)

	out := e.mustCall(e2b.ToolGetSandboxMetrics, map[string]any{"sandbox_id": id})
	sum := out["summary"].(map[string]any)
	if n := len(out["metrics"].([]any)); n != 13 || sum["samples"].(float64) != 13 {
		t.Errorf("metrics = %d samples, want 13 (5 s step over a minute)", n)
	}
	if avg := sum["avg_cpu_used_pct"].(float64); avg < 40 || avg > 60 {
		t.Errorf("avg cpu = %v, want about 50", avg)
	}
	m := out["metrics"].([]any)[0].(map[string]any)
	if m["timestamp"] != epoch.Format(time.RFC3339Nano) || m["mem_total_bytes"].(float64) != 512<<20 {
		t.Errorf("first sample = %v", m)
	}
	out = e.mustCall(e2b.ToolGetSandboxMetrics, map[string]any{"sandbox_id": id,
		"start": epoch.Add(30 * time.Second).Unix(), "end": epoch.Add(40 * time.Second).Unix()})
	if n := len(out["metrics"].([]any)); n != 3 {
		t.Errorf("metrics in [30 s, 40 s] = %d, want 3", n)
	}
	_, err := e.call(e2b.ToolGetSandboxMetrics, map[string]any{"sandbox_id": id, "start": 20, "end": 10})
	wantCode(t, err, mcpgate.EInvalid)
}

func TestTools_snapshots(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	id := e.create(nil)
	for _, name := range []string{`{"name":"first"}`, `{}`, `{"name":"third"}`} {
		if resp := do(t, http.MethodPost, e.srv.URL+"/sandboxes/"+id+"/snapshots", testKey, name); resp.StatusCode != http.StatusCreated {
			t.Fatalf("create snapshot: status %d", resp.StatusCode)
		}
	}
	ids := itemIDs(e.pages(e2b.ToolListSnapshots, map[string]any{"limit": 2}), "data", "snapshot_id")
	if len(ids) != 3 || !strings.HasSuffix(ids[0], "/third:default") {
		t.Errorf("snapshots = %v", ids)
	}
	out := e.mustCall(e2b.ToolListSnapshots, map[string]any{"name": "first"})
	if n := len(out["data"].([]any)); n != 1 {
		t.Errorf("by name = %d, want 1", n)
	}
	// A sandbox can be created from a snapshot.
	e.create(map[string]any{"template_id": ids[0]})
}

func TestTools_findIdle(t *testing.T) {
	e := newEnv(t, e2bsim.Options{MaxRunning: 200})
	var idle, busy []string
	for i := range 102 { // more than one page of 100
		cpu := "50"
		if i%3 == 0 {
			cpu = "1"
		}
		id := e.create(map[string]any{"timeout": 3600, "metadata": map[string]string{e2bsim.CPUMetadataKey: cpu}})
		if cpu == "1" {
			idle = append(idle, id)
		} else {
			busy = append(busy, id)
		}
	}
	e.clock.Advance(15 * time.Minute)
	young := e.create(map[string]any{"metadata": map[string]string{e2bsim.CPUMetadataKey: "0"}})

	out := e.mustCall(e2b.ToolFindIdleSandboxes, nil)
	if out["window_minutes"].(float64) != 10 || out["cpu_threshold_pct"].(float64) != 5 {
		t.Errorf("defaults = %v, %v", out["window_minutes"], out["cpu_threshold_pct"])
	}
	if out["checked"].(float64) != 103 || out["active_count"].(float64) != float64(len(busy)) {
		t.Errorf("checked = %v, active = %v", out["checked"], out["active_count"])
	}
	got := map[string]bool{}
	for _, it := range out["idle"].([]any) {
		s := it.(map[string]any)
		got[s["sandbox_id"].(string)] = true
		if s["samples"].(float64) != 121 || s["max_cpu_used_pct"].(float64) >= 5 {
			t.Errorf("idle figures = %v", s)
		}
	}
	for _, id := range idle {
		if !got[id] {
			t.Errorf("idle sandbox %s not flagged", id)
		}
	}
	if len(got) != len(idle) {
		t.Errorf("flagged %d, want %d", len(got), len(idle))
	}
	skipped := out["skipped"].([]any)
	if len(skipped) != 1 || skipped[0].(map[string]any)["sandbox_id"] != young {
		t.Errorf("skipped = %v, want the young sandbox", skipped)
	}

	// A higher threshold flags the busy ones too.
	out = e.mustCall(e2b.ToolFindIdleSandboxes, map[string]any{"cpu_threshold_pct": 100, "window_minutes": 5})
	if n := len(out["idle"].([]any)); n != 102 {
		t.Errorf("threshold 100%%: %d idle, want 102", n)
	}

	// A rate limit on metrics stops the scan with the 429, not a partial answer.
	e.sim.Inject(e2bsim.Fault{Path: "/sandboxes/*", Method: http.MethodGet, Status: http.StatusTooManyRequests, RetryAfter: "7"})
	_, err := e.call(e2b.ToolFindIdleSandboxes, nil)
	wantCode(t, err, mcpgate.ETooMany)
	if mcpgate.ErrorRetryAfter(err) != 7 {
		t.Errorf("RetryAfter = %d, want 7", mcpgate.ErrorRetryAfter(err))
	}
}

func TestTools_defaultsAndBounds(t *testing.T) {
	c := e2b.New(e2b.Options{})
	tool := func(name string) interface {
		Decode(json.RawMessage) (map[string]any, error)
	} {
		for _, tl := range c.Tools() {
			if tl.Name == name {
				return tl
			}
		}
		t.Fatalf("no tool %s", name)
		return nil
	}
	const id = `"iabcdefghij0123456789"`
	tests := []struct {
		name, tool, args string
		want             map[string]any // checked keys after defaults
		wantErr          bool
	}{
		{name: "sandboxes default limit", tool: e2b.ToolListSandboxes, args: `{}`, want: map[string]any{"limit": 50.0}},
		{name: "sandboxes limit 100", tool: e2b.ToolListSandboxes, args: `{"limit":100}`, want: map[string]any{"limit": int64(100)}},
		{name: "sandboxes limit 101", tool: e2b.ToolListSandboxes, args: `{"limit":101}`, wantErr: true},
		{name: "sandboxes limit 0", tool: e2b.ToolListSandboxes, args: `{"limit":0}`, wantErr: true},
		{name: "unknown state", tool: e2b.ToolListSandboxes, args: `{"state":"dead"}`, wantErr: true},
		{name: "unknown argument", tool: e2b.ToolListSandboxes, args: `{"limt":5}`, wantErr: true},
		{name: "logs defaults", tool: e2b.ToolGetSandboxLogs, args: `{"sandbox_id":` + id + `}`,
			want: map[string]any{"limit": 100.0, "direction": "backward"}},
		{name: "logs limit 1001", tool: e2b.ToolGetSandboxLogs, args: `{"sandbox_id":` + id + `,"limit":1001}`, wantErr: true},
		{name: "logs direction", tool: e2b.ToolGetSandboxLogs, args: `{"sandbox_id":` + id + `,"direction":"sideways"}`, wantErr: true},
		{name: "logs search too long", tool: e2b.ToolGetSandboxLogs, args: `{"sandbox_id":` + id + `,"search":"` + strings.Repeat("x", 257) + `"}`, wantErr: true},
		{name: "create defaults", tool: e2b.ToolCreateSandbox, args: `{}`,
			want: map[string]any{"template_id": "base", "timeout": 300.0, "auto_pause": false, "allow_internet_access": true}},
		{name: "create timeout 0", tool: e2b.ToolCreateSandbox, args: `{"timeout":0}`, wantErr: true},
		{name: "create timeout too long", tool: e2b.ToolCreateSandbox, args: `{"timeout":86401}`, wantErr: true},
		{name: "create bad template", tool: e2b.ToolCreateSandbox, args: `{"template_id":"../admin"}`, wantErr: true},
		{name: "pause memory default", tool: e2b.ToolPauseSandbox, args: `{"sandbox_id":` + id + `}`, want: map[string]any{"memory": true}},
		{name: "pause bad id", tool: e2b.ToolPauseSandbox, args: `{"sandbox_id":"../../x"}`, wantErr: true},
		{name: "kill needs id", tool: e2b.ToolKillSandbox, args: `{}`, wantErr: true},
		{name: "timeout needs timeout", tool: e2b.ToolSetSandboxTimeout, args: `{"sandbox_id":` + id + `}`, wantErr: true},
		{name: "timeout under a minute", tool: e2b.ToolSetSandboxTimeout, args: `{"sandbox_id":` + id + `,"timeout":0}`, wantErr: true},
		{name: "resume default", tool: e2b.ToolResumeSandbox, args: `{"sandbox_id":` + id + `}`, want: map[string]any{"timeout": 300.0}},
		{name: "idle defaults", tool: e2b.ToolFindIdleSandboxes, args: `null`, want: map[string]any{"window_minutes": 10.0, "cpu_threshold_pct": 5.0}},
		{name: "not an object", tool: e2b.ToolListTemplates, args: `[1]`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tool(tt.tool).Decode(json.RawMessage(tt.args))
			if (err != nil) != tt.wantErr {
				t.Fatalf("Decode(%s) err = %v, wantErr %v", tt.args, err, tt.wantErr)
			}
			if err != nil {
				wantCode(t, err, mcpgate.EInvalid)
				return
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("Decode(%s)[%s] = %#v, want %#v", tt.args, k, got[k], v)
				}
			}
		})
	}
}

func TestTools_stripping(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	id := e.createRaw(e2b.NewSandbox{TemplateID: "base", Timeout: 3600, Secure: true, Network: json.RawMessage(secretNetwork),
		EnvVars: map[string]string{"API_KEY": "env-var-s3cr3t"}, Metadata: map[string]string{"user": "abc"}})
	paused := e.createRaw(e2b.NewSandbox{TemplateID: "base", Timeout: 3600, Secure: true, Network: json.RawMessage(secretNetwork)})
	e.clock.Advance(11 * time.Minute)
	if err := e.conn.Client().PauseSandbox(context.Background(), testKey, paused, true); err != nil {
		t.Fatal(err)
	}
	do(t, http.MethodPost, e.srv.URL+"/sandboxes/"+id+"/snapshots", testKey, `{"name":"snap"}`)

	calls := []struct {
		tool string
		args map[string]any
	}{
		{e2b.ToolListDefaultTemplates, nil},
		{e2b.ToolListTemplates, nil},
		{e2b.ToolListTemplateBuilds, map[string]any{"template_id": "nosuchtemplate"}},
		{e2b.ToolCreateSandbox, nil},
		{e2b.ToolListSandboxes, nil},
		{e2b.ToolGetSandbox, map[string]any{"sandbox_id": id}},
		{e2b.ToolGetSandbox, map[string]any{"sandbox_id": paused}},
		{e2b.ToolGetSandboxLogs, map[string]any{"sandbox_id": id}},
		{e2b.ToolGetSandboxMetrics, map[string]any{"sandbox_id": id}},
		{e2b.ToolSetSandboxTimeout, map[string]any{"sandbox_id": id, "timeout": 7200}},
		{e2b.ToolResumeSandbox, map[string]any{"sandbox_id": id}},
		{e2b.ToolResumeSandbox, map[string]any{"sandbox_id": paused}},
		{e2b.ToolPauseSandbox, map[string]any{"sandbox_id": paused}},
		{e2b.ToolListSnapshots, nil},
		{e2b.ToolFindIdleSandboxes, nil},
		{e2b.ToolKillSandbox, map[string]any{"sandbox_id": paused}},
	}
	for _, c := range calls {
		e.call(c.tool, c.args) // outputs and errors are scanned at cleanup
	}
	got := e.mustCall(e2b.ToolGetSandbox, map[string]any{"sandbox_id": id})
	b, _ := json.Marshal(got["network"])
	want := `{"allow_out":["1.1.1.1"],"allow_public_traffic":false,"deny_out":["10.0.0.0/8"],` +
		`"egress_proxy":{"address":"proxy.example.com:1080","username":"[redacted]"},` +
		`"rules":{"api.example.com":[{"headers":{"Authorization":"[redacted]"}}]}}`
	if string(b) != want {
		t.Errorf("network = %s\nwant      %s", b, want)
	}

	// An upstream error message quoting a secret is not passed on.
	e.sim.Inject(e2bsim.Fault{Path: "/v2/sandboxes", Status: http.StatusBadRequest,
		Message: "invalid header Authorization: Bearer rule-header-s3cr3t", Times: 1})
	_, err := e.call(e2b.ToolListSandboxes, nil)
	wantCode(t, err, mcpgate.EInvalid)

	// The simulator really issued every kind of secret this test looks for.
	secrets := strings.Join(e.sim.Secrets(), " ")
	for _, s := range []string{"ea_", "ta_", "rule-header-s3cr3t", "proxy-user-s3cr3t", "proxy-pass-s3cr3t", "env-var-s3cr3t"} {
		if !strings.Contains(secrets, s) {
			t.Errorf("simulator did not issue %s", s)
		}
	}
}

// TestTools_metadataFilter: the tools' metadata argument is not a URL query
// ("+" stays a plus), and the filter reaches E2B intact, with the characters
// that broke the old two-level encoding.
func TestTools_metadataFilter(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	cpp := e.create(map[string]any{"timeout": 3600, "metadata": map[string]string{"tag": "c++", "e2bsim_cpu": "0.5"}})
	amp := e.create(map[string]any{"timeout": 3600, "metadata": map[string]string{"q": "x&y=z", "pct": "100%"}})
	e.create(map[string]any{"timeout": 3600, "metadata": map[string]string{"tag": "c  "}})
	tests := []struct{ filter, want string }{
		{"tag=c++", cpp},
		{"q=x%26y%3Dz", amp},
		{"pct=100%25", amp},
		{"pct=100%", amp}, // a "%" that starts no escape is taken as written
	}
	for _, tt := range tests {
		out := e.mustCall(e2b.ToolListSandboxes, map[string]any{"metadata": tt.filter})
		data := out["data"].([]any)
		if len(data) != 1 || data[0].(map[string]any)["sandbox_id"] != tt.want {
			t.Errorf("list metadata=%q = %v, want only %s", tt.filter, data, tt.want)
		}
	}
	e.clock.Advance(11 * time.Minute)
	idle := e.mustCall(e2b.ToolFindIdleSandboxes, map[string]any{"metadata": "tag=c++"})["idle"].([]any)
	if len(idle) != 1 || idle[0].(map[string]any)["sandbox_id"] != cpp {
		t.Errorf("find idle metadata=tag=c++ = %v, want only %s", idle, cpp)
	}
	for _, bad := range []string{"novalue", "=v", "a=1&a=2"} {
		_, err := e.call(e2b.ToolListSandboxes, map[string]any{"metadata": bad})
		wantCode(t, err, mcpgate.EInvalid)
	}
}

// TestTools_timeoutOnPaused: E2B answers 404 to a timeout change on a paused
// sandbox; the tool must not tell the model the sandbox is gone.
func TestTools_timeoutOnPaused(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	id := e.create(map[string]any{"timeout": 3600})
	e.mustCall(e2b.ToolPauseSandbox, map[string]any{"sandbox_id": id})
	_, err := e.call(e2b.ToolSetSandboxTimeout, map[string]any{"sandbox_id": id, "timeout": 600})
	wantCode(t, err, mcpgate.EConflict)
	if msg := mcpgate.ErrorMessage(err); !strings.Contains(msg, "is paused") || !strings.Contains(msg, "e2b_resume_sandbox") ||
		strings.Contains(msg, "never existed") {
		t.Errorf("message = %q, want it to say the sandbox is paused and can be resumed", msg)
	}
	if got := connectors.UpstreamStatus(err); got != http.StatusNotFound {
		t.Errorf("UpstreamStatus = %d, want E2B's 404 kept for the audit", got)
	}
	// Really gone: the 404 stands.
	_, err = e.call(e2b.ToolSetSandboxTimeout, map[string]any{"sandbox_id": "iaaaaaaaaaaaaaaaaaaaa", "timeout": 600})
	wantCode(t, err, mcpgate.ENotFound)
}

// TestTools_clampedEndTime: on the Hobby plan (1 h), E2B silently caps the
// end time at start + 1 h; the tools report that end, not now + timeout.
func TestTools_clampedEndTime(t *testing.T) {
	e := newEnv(t, e2bsim.Options{MaxLifetime: e2bsim.HobbyMaxLifetime})
	id := e.create(map[string]any{"timeout": 3600})
	e.clock.Advance(50 * time.Minute)
	limit := epoch.Add(time.Hour).Format(time.RFC3339Nano)

	out := e.mustCall(e2b.ToolSetSandboxTimeout, map[string]any{"sandbox_id": id, "timeout": 3600})
	if out["end_at"] != limit || out["clamped"] != true || out["note"] == nil ||
		out["requested_end_at"] != epoch.Add(50*time.Minute+time.Hour).Format(time.RFC3339) {
		t.Errorf("set timeout = %v, want end_at %s, clamped", out, limit)
	}
	out = e.mustCall(e2b.ToolResumeSandbox, map[string]any{"sandbox_id": id, "timeout": 3600})
	if out["action"] != "extended" || out["end_at"] != limit || out["clamped"] != true {
		t.Errorf("resume = %v, want end_at %s, clamped", out, limit)
	}
	out = e.mustCall(e2b.ToolSetSandboxTimeout, map[string]any{"sandbox_id": id, "timeout": 60})
	if out["clamped"] != false || out["end_at"] != epoch.Add(51*time.Minute).Format(time.RFC3339Nano) {
		t.Errorf("short timeout = %v, want not clamped", out)
	}
	_, err := e.call(e2b.ToolCreateSandbox, map[string]any{"timeout": 7200})
	wantCode(t, err, mcpgate.EInvalid)
	if !strings.Contains(mcpgate.ErrorMessage(err), "timeout") {
		t.Errorf("create over the plan's maximum: %q, want it to name timeout", mcpgate.ErrorMessage(err))
	}
}

// TestTools_createSecure: secure follows the template (E2B refuses it for an
// envd older than 0.2.0) or the argument; domain is passed on.
func TestTools_createSecure(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	if out := e.mustCall(e2b.ToolCreateSandbox, nil); out["secure"] != true {
		t.Errorf("create from base = %v, want secure", out)
	}
	out := e.mustCall(e2b.ToolCreateSandbox, map[string]any{"template_id": "worker"})
	if out["secure"] != false || out["envd_version"] != "0.1.5" {
		t.Errorf("create from an old-envd template = %v, want it created without secure", out)
	}
	if out := e.mustCall(e2b.ToolCreateSandbox, map[string]any{"secure": false}); out["secure"] != false {
		t.Errorf("secure=false = %v", out)
	}
	_, err := e.call(e2b.ToolCreateSandbox, map[string]any{"template_id": "worker", "secure": true})
	wantCode(t, err, mcpgate.EInvalid)
	if !strings.Contains(mcpgate.ErrorMessage(err), "secure=false") {
		t.Errorf("message = %q, want it to suggest secure=false", mcpgate.ErrorMessage(err))
	}
	running := e.mustCall(e2b.ToolListSandboxes, nil)["total_running"].(float64)
	if running != 3 {
		t.Errorf("running = %v, want 3: the retry without secure must not create twice", running)
	}

	e.sim.Inject(e2bsim.Fault{Method: http.MethodPost, Path: "/v2/sandboxes", Status: http.StatusCreated, Times: 1,
		Body: `{"templateID":"t","sandboxID":"iabcdefghij0123456789","clientID":"c","envdVersion":"0.2.4","domain":"byoc.example.com","envdAccessToken":"ea_x"}`})
	out = e.mustCall(e2b.ToolCreateSandbox, nil)
	if out["domain"] != "byoc.example.com" || out["host"] != "<port>-iabcdefghij0123456789.byoc.example.com" {
		t.Errorf("create on a BYOC cluster = %v, want its domain", out)
	}
	if strings.Contains(fmt.Sprint(out), "ea_x") {
		t.Errorf("access token in output: %v", out)
	}
}

// TestTools_emptyResults: empty lists are results too, and must satisfy the
// output schemas (e.call validates every output).
func TestTools_emptyResults(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	const unknown = "iaaaaaaaaaaaaaaaaaaaa" // logs and metrics of an unknown id are empty on E2B, not 404
	for _, c := range []struct {
		tool, list string
		args       map[string]any
	}{
		{e2b.ToolListSandboxes, "data", nil},
		{e2b.ToolListSandboxes, "data", map[string]any{"state": "paused"}},
		{e2b.ToolListSnapshots, "data", nil},
		{e2b.ToolGetSandboxLogs, "logs", map[string]any{"sandbox_id": unknown}},
		{e2b.ToolGetSandboxMetrics, "metrics", map[string]any{"sandbox_id": unknown}},
		{e2b.ToolFindIdleSandboxes, "idle", nil},
	} {
		out := e.mustCall(c.tool, c.args)
		if l, ok := out[c.list].([]any); !ok || len(l) != 0 {
			t.Errorf("%s(%v)[%s] = %v, want an empty list (not null)", c.tool, c.args, c.list, out[c.list])
		}
	}
}

// TestTools_findIdleFanOutBounded: one call inspects at
// most 200 sandboxes, so one tools/call cannot make thousands of upstream
// calls; the answer says it was truncated.
func TestTools_findIdleFanOutBounded(t *testing.T) {
	e := newEnv(t, e2bsim.Options{MaxRunning: 300})
	for range 250 {
		e.create(map[string]any{"timeout": 3600, "metadata": map[string]string{e2bsim.CPUMetadataKey: "1"}})
	}
	e.clock.Advance(15 * time.Minute)
	out := e.mustCall(e2b.ToolFindIdleSandboxes, nil)
	if out["checked"].(float64) != 200 || out["truncated"] != true {
		t.Errorf("checked = %v, truncated = %v; want 200 and true", out["checked"], out["truncated"])
	}
}

func TestGuard_setTimeout(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	killed := e.create(map[string]any{"timeout": 3600})
	paused := e.create(map[string]any{"timeout": 3600, "auto_pause": true})
	tests := []struct {
		name, args  string
		wantFollows bool
	}{
		{"earlier end, killed at timeout", `{"sandbox_id":"` + killed + `","timeout":60}`, true},
		{"just earlier", `{"sandbox_id":"` + killed + `","timeout":3599}`, true},
		{"later end", `{"sandbox_id":"` + killed + `","timeout":7200}`, false},
		{"earlier end, auto-paused", `{"sandbox_id":"` + paused + `","timeout":60}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			as, err := e.assess(e2b.ToolSetSandboxTimeout, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if got := as.Follows == e2b.ToolKillSandbox; got != tt.wantFollows {
				t.Fatalf("Follows = %q, want kill: %v", as.Follows, tt.wantFollows)
			}
			if tt.wantFollows && !strings.Contains(as.Reason, "not auto-paused") {
				t.Errorf("Reason = %q", as.Reason)
			}
			if as.Lifetime < time.Minute || as.Starts {
				t.Errorf("Assessment = %+v, want the lifetime and no start", as)
			}
		})
	}
	_, err := e.assess(e2b.ToolSetSandboxTimeout, `{"sandbox_id":"iaaaaaaaaaaaaaaaaaaaa","timeout":60}`)
	wantCode(t, err, mcpgate.ENotFound)

	// On a paused sandbox a timeout counts as what it would do
	// once running (a resume racing it would have its end replaced), unless
	// the sandbox is auto-paused.
	e.mustCall(e2b.ToolPauseSandbox, map[string]any{"sandbox_id": killed})
	e.mustCall(e2b.ToolPauseSandbox, map[string]any{"sandbox_id": paused})
	as, err := e.assess(e2b.ToolSetSandboxTimeout, `{"sandbox_id":"`+killed+`","timeout":7200}`)
	if err != nil || as.Follows != e2b.ToolKillSandbox || !strings.Contains(as.Reason, "is paused") ||
		!strings.Contains(as.Reason, e2b.ToolResumeSandbox) {
		t.Errorf("a later end on a paused sandbox = %+v, %v; want kill followed, with a pointer to resume", as, err)
	}
	if as, err := e.assess(e2b.ToolSetSandboxTimeout, `{"sandbox_id":"`+paused+`","timeout":60}`); err != nil || as.Follows != "" {
		t.Errorf("a timeout on a paused auto-paused sandbox = %+v, %v; want nothing followed", as, err)
	}
}

func TestGuard_resumeAndCreate(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	sb := e.create(map[string]any{"timeout": 3600})
	// A resume under a minute follows kill whatever the state: a
	// pause landing first would make it end the sandbox.
	as, err := e.assess(e2b.ToolResumeSandbox, `{"sandbox_id":"`+sb+`","timeout":30}`)
	if err != nil || as.Starts || as.Follows != e2b.ToolKillSandbox || !strings.Contains(as.Reason, "whatever the sandbox's state") {
		t.Errorf("extending a running one for 30 s = %+v, %v; want nothing started, kill followed", as, err)
	}
	as, err = e.assess(e2b.ToolResumeSandbox, `{"sandbox_id":"`+sb+`","timeout":60}`)
	if err != nil || as.Starts || as.Follows != "" {
		t.Errorf("extending a running one for 60 s = %+v, %v; want nothing started, nothing followed", as, err)
	}
	auto := e.create(map[string]any{"timeout": 3600, "auto_pause": true})
	if as, err := e.assess(e2b.ToolResumeSandbox, `{"sandbox_id":"`+auto+`","timeout":1}`); err != nil || as.Follows != "" {
		t.Errorf("extending an auto-paused one for 1 s = %+v, %v; want nothing followed", as, err)
	}
	e.mustCall(e2b.ToolKillSandbox, map[string]any{"sandbox_id": auto})
	e.mustCall(e2b.ToolPauseSandbox, map[string]any{"sandbox_id": sb})
	as, err = e.assess(e2b.ToolResumeSandbox, `{"sandbox_id":"`+sb+`","timeout":30}`)
	if err != nil || !as.Starts || as.Follows != e2b.ToolKillSandbox {
		t.Errorf("resuming a paused one for 30 s = %+v, %v; want a start that follows kill", as, err)
	}
	as, err = e.assess(e2b.ToolResumeSandbox, `{"sandbox_id":"`+sb+`"}`)
	if err != nil || !as.Starts || as.Follows != "" || as.Lifetime != 300*time.Second {
		t.Errorf("resuming for the default 300 s = %+v, %v", as, err)
	}
	as, err = e.assess(e2b.ToolCreateSandbox, `{"template_id":"python:v2","timeout":120}`)
	if err != nil || !as.Starts || as.Lifetime != 2*time.Minute || len(as.Templates) != 1 || as.Templates[0] != "python" {
		t.Errorf("create = %+v, %v; want one start of template python for 2 min", as, err)
	}
	as, _ = e.assess(e2b.ToolCreateSandbox, `{}`)
	if as.Templates[0] != "base" || as.Lifetime != 300*time.Second {
		t.Errorf("create with defaults = %+v", as)
	}
	n, err := e.conn.Running(context.Background(), testKey)
	if err != nil || n != 0 {
		t.Errorf("Running() = %d, %v; want 0 (the one sandbox is paused)", n, err)
	}
	e.create(nil)
	if n, _ := e.conn.Running(context.Background(), testKey); n != 1 {
		t.Errorf("Running() = %d, want 1", n)
	}
}

func TestDescribe(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	sb := e.create(map[string]any{"timeout": 600, "metadata": map[string]any{"owner": "ana", "app": "web"}})
	e.clock.Advance(5 * time.Minute)
	got, err := e.conn.Describe(context.Background(), testKey, e2b.ToolKillSandbox, map[string]any{"sandbox_id": sb})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Kill sandbox " + sb, "cannot be resumed", "running", "template base", "started 5 min ago",
		"ends in 5 min", "metadata app=web, owner=ana"} {
		if !strings.Contains(got, want) {
			t.Errorf("Describe(kill) = %q, want %q in it", got, want)
		}
	}
	if got, err := e.conn.Describe(context.Background(), testKey, e2b.ToolListSandboxes, map[string]any{}); got != "" || err != nil {
		t.Errorf("Describe(list) = %q, %v; want the generic summary", got, err)
	}
	_, err = e.conn.Describe(context.Background(), testKey, e2b.ToolKillSandbox, map[string]any{"sandbox_id": "iaaaaaaaaaaaaaaaaaaaa"})
	wantCode(t, err, mcpgate.ENotFound)
}

// TestErrors maps every E2B failure to one coded, actionable error, for
// every tool, and records the upstream status for the audit log.
func TestErrors(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	id := e.create(nil)
	tmpl := e.mustCall(e2b.ToolListTemplates, nil)["data"].([]any)[0].(map[string]any)["template_id"]
	args := map[string]map[string]any{
		e2b.ToolListTemplateBuilds: {"template_id": tmpl},
		e2b.ToolGetSandbox:         {"sandbox_id": id},
		e2b.ToolGetSandboxLogs:     {"sandbox_id": id},
		e2b.ToolGetSandboxMetrics:  {"sandbox_id": id},
		e2b.ToolSetSandboxTimeout:  {"sandbox_id": id, "timeout": 600},
		e2b.ToolPauseSandbox:       {"sandbox_id": id},
		e2b.ToolResumeSandbox:      {"sandbox_id": id},
		e2b.ToolKillSandbox:        {"sandbox_id": id},
	}
	tests := []struct {
		name       string
		fault      e2bsim.Fault
		wantCode   mcpgate.Code
		wantStatus int
		wantText   string
	}{
		{"400", e2bsim.Fault{Status: 400, Message: "Timeout cannot be greater than 1 hours"}, mcpgate.EInvalid, 400, "timeout parameter"},
		{"401", e2bsim.Fault{Status: 401, Message: "Invalid API key"}, mcpgate.EUnauthorized, 401, "team API key"},
		{"403", e2bsim.Fault{Status: 403}, mcpgate.EForbidden, 403, ""},
		{"404", e2bsim.Fault{Status: 404}, mcpgate.ENotFound, 404, "not found"},
		{"409", e2bsim.Fault{Status: 409}, mcpgate.EConflict, 409, ""},
		{"429", e2bsim.Fault{Status: 429, RetryAfter: "12"}, mcpgate.ETooMany, 429, "wait 12 seconds"},
		{"429 without Retry-After", e2bsim.Fault{Status: 429, RetryAfter: "soon"}, mcpgate.ETooMany, 429, "wait 30 seconds"},
		{"500", e2bsim.Fault{Status: 500}, mcpgate.EUpstream, 500, "E2B had a problem on its side"},
		{"502", e2bsim.Fault{Status: 502}, mcpgate.EUpstream, 502, "HTTP 502"},
		{"503", e2bsim.Fault{Status: 503, Body: `{"code":503,"message":"no capacity","error_code":"sandbox_capacity_unavailable"}`},
			mcpgate.EUnavailable, 503, "no capacity"},
		{"malformed JSON", e2bsim.Fault{Status: 200, Body: `{"templates": [`}, mcpgate.EUpstream, 200, "could not read"},
		{"non-JSON error body", e2bsim.Fault{Status: 500, Body: `<html>oops</html>`}, mcpgate.EUpstream, 500, ""},
		{"reset", e2bsim.Fault{Reset: true}, mcpgate.EUnavailable, 0, "could not reach E2B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, tl := range e.conn.Tools() {
				if tt.name == "malformed JSON" && tl.Name != e2b.ToolListDefaultTemplates && tl.Name != e2b.ToolGetSandbox {
					continue // 2xx without a body are fine for 204 routes
				}
				remove := e.sim.Inject(tt.fault)
				_, err := e.call(tl.Name, args[tl.Name])
				remove()
				if got := mcpgate.ErrorCode(err); got != tt.wantCode {
					t.Errorf("%s: err = %v (code %q), want %q", tl.Name, err, got, tt.wantCode)
					continue
				}
				if got := connectors.UpstreamStatus(err); got != tt.wantStatus {
					t.Errorf("%s: UpstreamStatus() = %d, want %d", tl.Name, got, tt.wantStatus)
				}
				if msg := mcpgate.ErrorMessage(err); !strings.Contains(msg, tt.wantText) {
					t.Errorf("%s: message %q, want it to contain %q", tl.Name, msg, tt.wantText)
				}
			}
		})
	}
	remove := e.sim.Inject(e2bsim.Fault{Status: 429, RetryAfter: "12"})
	_, err := e.call(e2b.ToolListSandboxes, nil)
	remove()
	if got := mcpgate.ErrorRetryAfter(err); got != 12 {
		t.Errorf("RetryAfter = %d, want 12", got)
	}
}

// TestErrors_realStatuses: the simulator's own refusals. E2B's concurrency
// 429 has no Retry-After; the gateway suggests a wait anyway, and the
// message says what lifts the limit, which waiting alone would not.
func TestErrors_realStatuses(t *testing.T) {
	e := newEnv(t, e2bsim.Options{MaxRunning: 1})
	e.create(nil)
	_, err := e.call(e2b.ToolCreateSandbox, nil)
	wantCode(t, err, mcpgate.ETooMany)
	if mcpgate.ErrorRetryAfter(err) <= 0 {
		t.Errorf("RetryAfter = %d, want > 0", mcpgate.ErrorRetryAfter(err))
	}
	if msg := mcpgate.ErrorMessage(err); !strings.Contains(msg, "concurrent sandboxes") || !strings.Contains(msg, "Pause or kill") {
		t.Errorf("message = %q", msg)
	}
	e.sim.BlockTeam(testKey.Reveal(), true)
	_, err = e.call(e2b.ToolCreateSandbox, nil)
	wantCode(t, err, mcpgate.EForbidden)
}

func TestErrors_timeout(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	conn := e2b.New(e2b.Options{BaseURL: e.srv.URL, HTTPClient: e.srv.Client(), Timeout: 50 * time.Millisecond})
	e.sim.Inject(e2bsim.Fault{Delay: 5 * time.Second})
	start := time.Now()
	_, err := conn.Client().ListSandboxes(context.Background(), testKey, e2b.ListSandboxesParams{})
	wantCode(t, err, mcpgate.EUnavailable)
	if !strings.Contains(mcpgate.ErrorMessage(err), "did not answer") {
		t.Errorf("message = %q", mcpgate.ErrorMessage(err))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("call took %v, want the 50 ms deadline to stop it", d)
	}
}

func TestErrors_connectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	conn := e2b.New(e2b.Options{BaseURL: "http://" + addr, Timeout: time.Second})
	_, err = conn.Client().GetSandbox(context.Background(), testKey, "iabcdefghij0123456789")
	wantCode(t, err, mcpgate.EUnavailable)
	if connectors.UpstreamStatus(err) != 0 {
		t.Errorf("UpstreamStatus() = %d, want 0", connectors.UpstreamStatus(err))
	}
	if strings.Contains(err.Error(), testKey.Reveal()) {
		t.Errorf("error carries the key: %v", err)
	}
}

func TestErrors_oversized(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`[` + strings.Repeat(`{"sandboxID":"x"},`, e2b.MaxResponseBytes/17) + `{}]`))
	}))
	defer srv.Close()
	conn := e2b.New(e2b.Options{BaseURL: srv.URL, HTTPClient: srv.Client()})
	_, err := conn.Client().ListSandboxes(context.Background(), testKey, e2b.ListSandboxesParams{})
	wantCode(t, err, mcpgate.EUpstream)
	if !strings.Contains(mcpgate.ErrorMessage(err), "larger than 8 MiB") {
		t.Errorf("message = %q", mcpgate.ErrorMessage(err))
	}
}

// TestClient_request checks what goes on the wire: auth header, units and
// encodings E2B expects.
func TestClient_request(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.Header().Set("X-Next-Token", "tok")
		w.Header().Set("X-Total-Running", "3")
		w.Write([]byte(`[]`))
	}))
	defer srv.Close()
	c := e2b.NewClient(e2b.Options{BaseURL: srv.URL, HTTPClient: srv.Client()})
	page, err := c.ListSandboxes(context.Background(), testKey, e2b.ListSandboxesParams{
		States: []string{"running", "paused"}, Metadata: map[string]string{"user": "a b&c"},
		StartedAfter: epoch, Limit: 5, NextToken: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	if page.NextToken != "tok" || page.TotalRunning == nil || *page.TotalRunning != 3 {
		t.Errorf("page = %+v", page)
	}
	q := got.URL.Query()
	if got.Header.Get("X-API-Key") != testKey.Reveal() || q.Get("state") != "running,paused" || len(q["state"]) != 1 ||
		q.Get("metadata") != "user=a%2Bb%2526c" /* three levels, see TestContract_metadata */ || q.Get("startedAfter") != "2026-03-01T12:00:00Z" ||
		q.Get("limit") != "5" || q.Get("nextToken") != "abc" {
		t.Errorf("request = %s %v", got.URL, got.Header)
	}

	_, err = c.SandboxMetrics(context.Background(), testKey, "iabcdefghij0123456789", epoch, epoch.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if q := got.URL.Query(); q.Get("start") != "1772366400" || q.Get("end") != "1772366460" {
		t.Errorf("metrics query = %s, want Unix seconds", got.URL.RawQuery)
	}
}
