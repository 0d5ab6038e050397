package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/store/storetest"
)

// mustSetRelays writes relay settings through a change of the server, as
// the service does.
func mustSetRelays(t *testing.T, db *store.DB, k store.Sealer, ws, name string, r store.RelaySettings) error {
	t.Helper()
	return db.ChangeServer(context.Background(), k, ws, name, func(st *store.ServerState) (*store.ServerWrite, error) {
		return &store.ServerWrite{Server: *st.Server, KeepHeaders: true, KeepTools: true, Relays: &r}, nil
	})
}

// TestServerRelays: a server starts with sampling and roots off and no
// hosts; what a change sets is read back with the row and survives a
// change that does not name it; another workspace's server of the same
// name keeps its own; a malformed host is refused even past the service.
func TestServerRelays(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	k := mustKeyringOn(t, db, testRoot)
	ws, _ := mustWorkspace(t, db, "ada@example.com")
	other, _ := mustWorkspace(t, db, "bob@example.com")
	mustPutServer(t, db, k, ws, "files", "files_read")
	mustPutServer(t, db, k, other, "files", "files_read")
	row, err := db.FindServer(ctx, ws, "files")
	if err != nil || row.AllowSampling || row.AllowRoots || row.ElicitationURLHosts == nil || len(row.ElicitationURLHosts) != 0 {
		t.Fatalf("new server = %+v (%v), want nothing allowed and an empty list", row, err)
	}
	yes := true
	hosts := []string{"pay.example.com", "*.auth.example.org"}
	if err := mustSetRelays(t, db, k, ws, "files", store.RelaySettings{AllowSampling: &yes, ElicitationURLHosts: &hosts}); err != nil {
		t.Fatal(err)
	}
	mustPutServer(t, db, k, ws, "files", "files_read") // rewrites the row
	row, _ = db.FindServer(ctx, ws, "files")
	if !row.AllowSampling || row.AllowRoots || !cmp.Equal(row.ElicitationURLHosts, hosts) {
		t.Errorf("after the change = sampling %t, roots %t, hosts %q; want true, false, %q", row.AllowSampling, row.AllowRoots,
			row.ElicitationURLHosts, hosts)
	}
	if err := mustSetRelays(t, db, k, ws, "files", store.RelaySettings{AllowRoots: &yes}); err != nil {
		t.Fatal(err)
	}
	if row, _ = db.FindServer(ctx, ws, "files"); !row.AllowSampling || !row.AllowRoots || !cmp.Equal(row.ElicitationURLHosts, hosts) {
		t.Errorf("a change of roots alone left sampling %t, hosts %q", row.AllowSampling, row.ElicitationURLHosts)
	}
	if list, _ := db.FindServers(ctx, ws); len(list) != 1 || !list[0].AllowRoots {
		t.Errorf("FindServers() = %+v, want the settings", list)
	}
	if row, _ := db.FindServer(ctx, other, "files"); row.AllowSampling || row.AllowRoots || len(row.ElicitationURLHosts) != 0 {
		t.Errorf("the other workspace's server = %+v, want nothing allowed", row)
	}
	bad := []string{"https://pay.example.com"}
	if err := mustSetRelays(t, db, k, ws, "files", store.RelaySettings{ElicitationURLHosts: &bad}); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Errorf("malformed host err = %v, want invalid", err)
	}
	empty := []string{}
	if err := mustSetRelays(t, db, k, ws, "files", store.RelaySettings{ElicitationURLHosts: &empty}); err != nil {
		t.Fatal(err)
	}
	if row, _ = db.FindServer(ctx, ws, "files"); len(row.ElicitationURLHosts) != 0 || !row.AllowSampling {
		t.Errorf("after clearing the hosts = %+v", row)
	}
}

// TestRecordElicitationHost: a host is counted with its first and last
// sighting, per workspace and server; an unknown server or malformed host
// is refused; the hosts kept per server are bounded, the least recently
// seen going; the hosts go with their server.
func TestRecordElicitationHost(t *testing.T) {
	db := storetest.Open(t)
	ctx := context.Background()
	k := mustKeyringOn(t, db, testRoot)
	ws, _ := mustWorkspace(t, db, "ada@example.com")
	other, _ := mustWorkspace(t, db, "bob@example.com")
	mustPutServer(t, db, k, ws, "files", "files_read")
	mustPutServer(t, db, k, ws, "mail", "mail_read")
	mustPutServer(t, db, k, other, "files", "files_read")
	for range 3 {
		if err := db.RecordElicitationHost(ctx, ws, "files", "pay.example.com"); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.RecordElicitationHost(ctx, ws, "files", "login.example.net:8443"); err != nil {
		t.Fatal(err)
	}
	got, err := db.FindElicitationHosts(ctx, ws, "files")
	if err != nil || len(got) != 2 {
		t.Fatalf("FindElicitationHosts() = %+v, %v; want 2", got, err)
	}
	byHost := map[string]mcpgate.ElicitationHost{}
	for _, h := range got {
		byHost[h.Host] = h
	}
	if h := byHost["pay.example.com"]; h.Times != 3 || h.LastSeen.Before(h.FirstSeen) || h.FirstSeen.IsZero() {
		t.Errorf("pay.example.com = %+v, want seen 3 times", h)
	}
	if got[0].Host != "login.example.net:8443" {
		t.Errorf("most recently seen first: got %q first", got[0].Host)
	}
	for _, srv := range []struct{ ws, name string }{{ws, "mail"}, {other, "files"}} {
		if got, _ := db.FindElicitationHosts(ctx, srv.ws, srv.name); len(got) != 0 {
			t.Errorf("hosts of %s = %+v, want none", srv.name, got)
		}
	}
	if err := db.RecordElicitationHost(ctx, other, "nope", "pay.example.com"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Errorf("unknown server err = %v, want not_found", err)
	}
	if err := db.RecordElicitationHost(ctx, "not-a-uuid", "files", "pay.example.com"); mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		t.Errorf("malformed workspace err = %v, want not_found", err)
	}
	if err := db.RecordElicitationHost(ctx, ws, "files", "https://pay.example.com/"); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
		t.Errorf("malformed host err = %v, want invalid", err)
	}

	// Past the bound, the least recently seen host goes: pay.example.com
	// is seen again first, so login.example.net:8443 is the oldest.
	if err := db.RecordElicitationHost(ctx, ws, "files", "pay.example.com"); err != nil {
		t.Fatal(err)
	}
	for i := range mcpgate.MaxElicitationHostsSeen - 1 {
		if err := db.RecordElicitationHost(ctx, ws, "files", fmt.Sprintf("h%d.example.com", i)); err != nil {
			t.Fatal(err)
		}
	}
	got, _ = db.FindElicitationHosts(ctx, ws, "files")
	if len(got) != mcpgate.MaxElicitationHostsSeen {
		t.Fatalf("hosts kept = %d, want %d", len(got), mcpgate.MaxElicitationHostsSeen)
	}
	for _, h := range got {
		if h.Host == "login.example.net:8443" {
			t.Error("the least recently seen host was kept past the bound")
		}
	}
	if err := db.DeleteServer(ctx, ws, "files"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM upstream_elicitation_hosts WHERE workspace_id = $1`, ws).Scan(&n); err != nil || n != 0 {
		t.Errorf("hosts left after the server went = %d (%v), want 0", n, err)
	}
}
