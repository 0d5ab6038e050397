package e2bsim_test

import (
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/e2bsim"
)

// Tags are read the same way when a snapshot is created and when the list
// is filtered by name (infra snapshot_template_create.go and
// snapshot_template_list.go): an empty or "default" tag, in any case, is
// "default", and a bare name matches every tag. (TestSnapshotNames covers
// namespaces.)
func TestSnapshotNames_Tags(t *testing.T) {
	s := newSim(t, e2bsim.Options{})
	id := s.create(`{"templateID":"base","timeout":600}`)["sandboxID"].(string)
	var first map[string]any
	if resp := s.req("POST", "/sandboxes/"+id+"/snapshots", `{"name":"app:DEFAULT"}`, &first); resp.StatusCode != 201 {
		t.Fatalf("create snapshot app:DEFAULT = %d", resp.StatusCode)
	}
	snapshotID, _ := first["snapshotID"].(string)
	ns, rest, ok := strings.Cut(snapshotID, "/")
	if !ok || rest != "app:default" {
		t.Fatalf("snapshotID = %q, want <namespace>/app:default", snapshotID)
	}
	if got := s.status("POST", "/sandboxes/"+id+"/snapshots", `{"name":"`+ns+`/app:v2"}`); got != 201 {
		t.Fatalf("create snapshot %s/app:v2 = %d, want 201", ns, got)
	}
	tests := []struct {
		name      string
		wantCount int
	}{
		{name: "app", wantCount: 2},
		{name: ns + "/app", wantCount: 2},
		{name: "app:default", wantCount: 1},
		{name: "app:", wantCount: 1},
		{name: "app:v2", wantCount: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var list []map[string]any
			resp := s.req("GET", "/snapshots?name="+tt.name, "", &list)
			if resp.StatusCode != 200 || len(list) != tt.wantCount {
				t.Fatalf("GET /snapshots?name=%s = %d with %d snapshots, want 200 with %d", tt.name, resp.StatusCode,
					len(list), tt.wantCount)
			}
		})
	}
}
