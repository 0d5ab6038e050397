package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryDeps keeps test-only modules and helpers out of the binary's
// import graph: every package in it is compiled on a user's first `make run`
// (the first build is most of the time to a first tool call).
func TestBinaryDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps listed %d packages; want the binary's graph", len(deps))
	}
	forbidden := []string{
		"github.com/chromedp/", "github.com/compose-spec/", "github.com/google/go-cmp/", "go.uber.org/goleak",
		"k8s.io/", "sigs.k8s.io/",
		"github.com/mcpgate/mcpgate/internal/testutil", "github.com/mcpgate/mcpgate/internal/store/storetest",
		"github.com/mcpgate/mcpgate/internal/e2bsim", "github.com/mcpgate/mcpgate/bench", "testing",
		"github.com/mcpgate/mcpgate/internal/upstream/upstreamtest",
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f) && strings.HasSuffix(f, "/") || strings.HasPrefix(d, f+"/") {
				t.Errorf("cmd/mcpgate imports %s (via %s): keep test-only code out of the binary", d, f)
			}
		}
	}
}
