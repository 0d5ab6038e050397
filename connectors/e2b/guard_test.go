package e2b_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
)

// assess decodes args as the gateway does and runs the tool's guard.
func (e *env) assess(tool, args string) (connectors.Assessment, error) {
	e.t.Helper()
	tl := e.tool(tool)
	if tl.Guard == nil {
		e.t.Fatalf("%s has no guard", tool)
	}
	decoded, err := tl.Decode([]byte(args))
	if err != nil {
		e.t.Fatalf("Decode(%s) err = %v", args, err)
	}
	return tl.Guard(context.Background(), testKey, decoded)
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
}

func TestGuard_resumeAndCreate(t *testing.T) {
	e := newEnv(t, e2bsim.Options{})
	sb := e.create(map[string]any{"timeout": 3600})
	as, err := e.assess(e2b.ToolResumeSandbox, `{"sandbox_id":"`+sb+`","timeout":30}`)
	if err != nil || as.Starts || as.Follows != "" {
		t.Errorf("extending a running one = %+v, %v; want nothing started, nothing followed", as, err)
	}
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
