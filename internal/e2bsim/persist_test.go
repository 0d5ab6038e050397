package e2bsim_test

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/e2bsim"
)

func TestState_roundTrip(t *testing.T) {
	s := newSim(t, e2bsim.Options{})
	running := s.create(`{"templateID":"base","timeout":3600,"metadata":{"user":"abc"}}`)["sandboxID"].(string)
	paused := s.create(`{"templateID":"my-app","timeout":3600}`)["sandboxID"].(string)
	killed := s.create(`{"templateID":"base","timeout":3600}`)["sandboxID"].(string)
	s.status("POST", "/sandboxes/"+running+"/snapshots", `{"name":"snap"}`)
	s.clock.Advance(time.Minute)
	s.status("POST", "/sandboxes/"+paused+"/pause", ``)
	s.status("DELETE", "/sandboxes/"+killed, "")
	if !s.s.Changed() {
		t.Fatal("Changed() = false after changes")
	}
	var buf bytes.Buffer
	if err := s.s.SaveState(&buf); err != nil {
		t.Fatal(err)
	}
	if s.s.Changed() {
		t.Error("Changed() = true right after SaveState")
	}
	if strings.Contains(buf.String(), key) {
		t.Error("state file holds the API key")
	}

	// A new simulator (same seed, as after a restart) picks the state up.
	r := newSim(t, e2bsim.Options{})
	r.clock.Advance(time.Minute)
	if err := r.s.LoadState(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatalf("LoadState() err = %v", err)
	}
	var d map[string]any
	if got := r.req("GET", "/sandboxes/"+running, "", &d).StatusCode; got != 200 || d["state"] != "running" ||
		d["metadata"].(map[string]any)["user"] != "abc" {
		t.Errorf("running after restart = %d %v", got, d)
	}
	if r.req("GET", "/sandboxes/"+paused, "", &d); d["state"] != "paused" {
		t.Errorf("paused after restart = %v", d)
	}
	if got := r.status("GET", "/sandboxes/"+killed, ""); got != 404 {
		t.Errorf("killed after restart = %d, want 404", got)
	}
	var logs struct{ Logs []any }
	r.req("GET", "/v2/sandboxes/"+killed+"/logs", "", &logs)
	if len(logs.Logs) == 0 {
		t.Error("killed sandbox's logs lost in the restart")
	}
	var snaps []map[string]any
	r.req("GET", "/snapshots", "", &snaps)
	if len(snaps) != 1 {
		t.Errorf("snapshots after restart = %v", snaps)
	}
	var tmpls []map[string]any
	r.req("GET", "/v2/templates", "", &tmpls)
	if n := tmpls[2]["spawnCount"].(float64); n != 1 {
		t.Errorf("my-app spawn count after restart = %v, want 1", n)
	}
	// New ids do not collide with restored ones, although the seed repeats.
	for range 3 {
		if id := r.create(`{"templateID":"base"}`)["sandboxID"].(string); id == running || id == paused || id == killed {
			t.Fatalf("new sandbox reuses restored id %s", id)
		}
	}
}

func TestState_corrupt(t *testing.T) {
	good := func() string {
		s := newSim(t, e2bsim.Options{})
		s.create(`{"templateID":"base"}`)
		var buf bytes.Buffer
		if err := s.s.SaveState(&buf); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}()
	tests := []struct{ name, file string }{
		{"empty", ""},
		{"truncated", good[:len(good)/2]},
		{"not json", "sandboxes: []"},
		{"unknown field", strings.Replace(good, `"version"`, `"versoin"`, 1)},
		{"other version", strings.Replace(good, `"version": 1`, `"version": 9`, 1)},
		{"unknown template", strings.Replace(good, `"template_id": "`, `"template_id": "x`, 1)},
		{"unknown state", strings.Replace(good, `"state": "running"`, `"state": "zombie"`, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := e2bsim.New(e2bsim.Options{})
			if err := s.LoadState(strings.NewReader(tt.file)); err == nil {
				t.Fatalf("LoadState(%s) err = nil, want an error", tt.name)
			}
			// The simulator is untouched and still serves.
			srv := httptest.NewServer(s)
			defer srv.Close()
			sm := &sim{t: t, s: s, url: srv.URL}
			var list []any
			sm.req("GET", "/v2/sandboxes", "", &list)
			if len(list) != 0 {
				t.Errorf("after a failed load: %d sandboxes", len(list))
			}
		})
	}
}
