package mcpgate_test

import (
	"testing"

	"github.com/mcpgate/mcpgate"
)

// Derive builds what a front door keeps on a tool set once, typed: no
// caller asserts its type, and a second type asked of the same set is built
// for that caller rather than handed the first one's value.
func TestDerive(t *testing.T) {
	set := &mcpgate.ToolSet{WorkspaceID: "w1"}
	builds := 0
	build := func(s *mcpgate.ToolSet) *string { builds++; id := s.WorkspaceID; return &id }
	first := mcpgate.Derive(set, build)
	if again := mcpgate.Derive(set, build); again != first || builds != 1 {
		t.Fatalf("Derive() again = %p after %d builds, want %p after 1", again, builds, first)
	}
	if n := mcpgate.Derive(set, func(*mcpgate.ToolSet) int { return 7 }); n != 7 {
		t.Fatalf("Derive() of another type = %d, want 7", n)
	}
	if *mcpgate.Derive(set, build) != "w1" || builds != 1 {
		t.Fatalf("Derive() after another type rebuilt the first (%d builds)", builds)
	}
}
