package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

const serverHeader mcpgate.Secret = "Bearer srv-0123456789abcdef"

func mustPutServer(t *testing.T, db *store.DB, k store.Sealer, ws, name, exposed string) {
	t.Helper()
	err := db.ChangeServer(context.Background(), k, ws, name, func(st *store.ServerState) (*store.ServerWrite, error) {
		return &store.ServerWrite{Server: store.UpstreamServer{Server: mcpgate.Server{Name: name, URL: "https://mcp.example/" + name, Enabled: true}},
			Headers: map[string]mcpgate.Secret{"Authorization": serverHeader},
			Tools: []store.UpstreamTool{{Name: "read", Definition: json.RawMessage(`{"name":"read"}`), ExposedName: exposed, Listed: true,
				Hints: mcpgate.ToolHints{ReadOnly: new(bool)}}}}, nil
	})
	if err != nil {
		t.Fatalf("ChangeServer(%s) err = %v", name, err)
	}
}

// TestServers_ScopedSealedAndRotated: a server's rows are its workspace's
// alone, its headers are sealed bound to workspace and row (moved to
// another row they do not open) and follow key rotation, exposed names are
// unique in a workspace ignoring case, and declared hints keep false
// apart from unset.
func TestServers_ScopedSealedAndRotated(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	k := mustKeyringOn(t, db, testRoot)
	ws, _ := mustWorkspace(t, db, "ada@example.com")
	other, _ := mustWorkspace(t, db, "bob@example.com")
	mustPutServer(t, db, k, ws, "files", "files_read")
	mustPutServer(t, db, k, other, "files", "files_read") // same names, another workspace

	if _, err := db.FindServer(ctx, other, "nope"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Errorf("FindServer(missing) err = %v", err)
	}
	h, err := db.OpenServerHeaders(ctx, k, ws, "files")
	if err != nil || h["Authorization"] != serverHeader {
		t.Fatalf("OpenServerHeaders() = %v, %v", h, err)
	}
	var raw []byte
	if err := db.Pool.QueryRow(ctx, `SELECT sealed FROM upstream_server_headers WHERE workspace_id = $1`, ws).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if string(raw) == serverHeader.Reveal() || len(raw) < 20 {
		t.Fatalf("stored headers look unsealed")
	}
	tools, err := db.FindServerTools(ctx, ws, "")
	if err != nil || len(tools) != 1 || tools[0].Hints.ReadOnly == nil || *tools[0].Hints.ReadOnly || tools[0].Hints.Destructive != nil {
		t.Fatalf("FindServerTools() = %+v, %v; want readOnlyHint false declared, the rest unset", tools, err)
	}
	// A second server of Ada's cannot take files_read in another case.
	err = db.ChangeServer(ctx, k, ws, "docs", func(*store.ServerState) (*store.ServerWrite, error) {
		return &store.ServerWrite{Server: store.UpstreamServer{Server: mcpgate.Server{Name: "docs", URL: "https://mcp.example/docs"}},
			Tools: []store.UpstreamTool{{Name: "x", Definition: json.RawMessage(`{"name":"x"}`), ExposedName: "FILES_READ", Listed: true}}}, nil
	})
	if mcpgate.ErrorCode(err) != mcpgate.EConflict {
		t.Fatalf("ChangeServer(taken exposed name) err = %v, want conflict", err)
	}
	if _, err := db.FindServer(ctx, ws, "docs"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Errorf("the refused server was stored: %v", err)
	}
	// The plan sees what other servers hold.
	_ = db.ChangeServer(ctx, k, ws, "docs", func(st *store.ServerState) (*store.ServerWrite, error) {
		if st.Server != nil || len(st.Taken) != 1 || st.Taken[0] != "files_read" {
			t.Errorf("state for a new server = %+v, want none with files_read taken", st)
		}
		return nil, nil
	})

	// Bob's ciphertext in Ada's row does not open.
	if _, err := db.Pool.Exec(ctx, `UPDATE upstream_server_headers SET sealed = (SELECT sealed FROM upstream_server_headers WHERE workspace_id = $2)
		WHERE workspace_id = $1`, ws, other); err != nil {
		t.Fatal(err)
	}
	if _, err := db.OpenServerHeaders(ctx, k, ws, "files"); err == nil {
		t.Fatal("headers moved to another workspace's row opened")
	}
	if _, err := k.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	moved, failed, err := db.ResealOld(ctx, k, 10, nil)
	if err != nil || moved != 1 || len(failed) != 1 {
		t.Fatalf("ResealOld() = %d, %v, %v; want bob's moved and ada's (damaged) reported", moved, failed, err)
	}
	if h, err := db.OpenServerHeaders(ctx, k, other, "files"); err != nil || h["Authorization"] != serverHeader {
		t.Fatalf("OpenServerHeaders(after re-seal) = %v, %v", h, err)
	}
	if err := db.DeleteServer(ctx, other, "files"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.FindServer(ctx, ws, "files"); err != nil {
		t.Errorf("deleting Bob's server touched Ada's: %v", err)
	}
	var left int
	_ = db.Pool.QueryRow(ctx, `SELECT count(*) FROM upstream_tools WHERE workspace_id = $1`, other).Scan(&left)
	if left != 0 {
		t.Errorf("%d tools left after the server went", left)
	}
}

// TestChangeServer_SerialisedPerWorkspace: a second change of the
// workspace's servers waits for the first's transaction and decides on
// what it stored (two adds of one name cannot both succeed).
func TestChangeServer_SerialisedPerWorkspace(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	k := mustKeyringOn(t, db, testRoot)
	ws, _ := mustWorkspace(t, db, "ada@example.com")
	inPlan, release := make(chan struct{}), make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		firstDone <- db.ChangeServer(ctx, k, ws, "files", func(st *store.ServerState) (*store.ServerWrite, error) {
			close(inPlan)
			<-release
			return &store.ServerWrite{Server: store.UpstreamServer{Server: mcpgate.Server{Name: "files", URL: "https://mcp.example/files"}}}, nil
		})
	}()
	<-inPlan
	secondSaw := make(chan bool, 1)
	secondDone := make(chan error, 1)
	go func() {
		secondDone <- db.ChangeServer(ctx, k, ws, "files", func(st *store.ServerState) (*store.ServerWrite, error) {
			secondSaw <- st.Server != nil
			return nil, nil
		})
	}()
	// The second is queued on the workspace's lock before the first goes on.
	for {
		var waiting int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case err := <-secondDone:
			t.Fatalf("the second change ran while the first held the lock: %v", err)
		default:
		}
	}
	close(release)
	if err := <-firstDone; err != nil {
		t.Fatalf("first ChangeServer() err = %v", err)
	}
	if err := <-secondDone; err != nil {
		t.Fatalf("second ChangeServer() err = %v", err)
	}
	if !<-secondSaw {
		t.Error("the second change decided without the server the first stored")
	}
}
