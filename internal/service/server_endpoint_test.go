package service_test

import (
	"context"
	"slices"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/upstream/upstreamtest"
)

// everyToolCallable is a tool service whose tool set holds every name it
// is given: the endpoint's own filter (the catalog's state) is what the
// test observes.
type everyToolCallable struct {
	mcpgate.ToolService
	names []string
}

func (f everyToolCallable) ToolSet(_ context.Context, a *mcpgate.Actor) (*mcpgate.ToolSet, error) {
	set := &mcpgate.ToolSet{WorkspaceID: a.WorkspaceID, Scope: a.Scope, All: map[string]mcpgate.ToolInfo{}}
	for _, n := range f.names {
		info := mcpgate.ToolInfo{Name: n, Enabled: true, Approval: mcpgate.ApprovalModel}
		set.All[n] = info
		set.Tools = append(set.Tools, info)
	}
	return set, nil
}

// TestEndpoints_ToolsAndTenancy: a server's endpoint lists its tools by
// their own names with the exposed names they are called by, only those
// that are on, not quarantined and in the caller's tool set (those the set
// knows but the caller may not call are kept apart, for the service to
// refuse); another
// workspace's server, a missing and a disabled one are the same not_found.
func TestEndpoints_ToolsAndTenancy(t *testing.T) {
	ctx := context.Background()
	e := newServersEnv(t, loopbackNetwork)
	up := upstreamtest.New(t, fixtureTools()...)
	_, a := e.NewUser(t, "a@example.com")
	_, b := e.NewUser(t, "b@example.com")
	mustAddServer(t, e, a, "files", up.URL)
	on := true
	if _, err := e.svc.SetServerTool(ctx, a, "files", "write", mcpgate.ToolUpdate{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	// delete is on but quarantined after the server changes it.
	if _, err := e.svc.SetServerTool(ctx, a, "files", "delete", mcpgate.ToolUpdate{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	tools := fixtureTools()
	tools[3].Description = "deletes, and more"
	up.SetTools(tools...)
	if _, err := e.svc.DiscoverServer(ctx, a, "files"); err != nil {
		t.Fatal(err)
	}
	// The tool set knows read and delete and bare, not write: write is
	// left out although it is on (the set decides scope and policy), bare
	// although the set has it (it is off), delete as quarantined.
	eps := service.NewEndpoints(e.svc, everyToolCallable{names: []string{"files_read", "files_delete", "files_bare"}}, nil)
	ep, err := eps.ServerEndpoint(ctx, a, "files")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tool := range ep.Tools {
		got = append(got, tool.Name+"="+tool.ExposedName+"/"+string(tool.Approval))
	}
	if !slices.Equal(got, []string{"read=files_read/model"}) || ep.Server != "files" || len(ep.Init) == 0 {
		t.Errorf("ServerEndpoint() = %v (server %q, init %d bytes), want read under files_read with the set's approval", got, ep.Server, len(ep.Init))
	}
	// bare is off but known to the tool service: a call of it goes there
	// and is refused with the reason; write, unknown to the set, and
	// delete, quarantined, are no tools of the endpoint at all.
	if len(ep.Hidden) != 1 || ep.Hidden["bare"] != "files_bare" {
		t.Errorf("ServerEndpoint().Hidden = %v, want bare under files_bare", ep.Hidden)
	}

	_, missing := eps.ServerEndpoint(ctx, a, "nope")
	_, other := eps.ServerEndpoint(ctx, b, "files")
	_, relayOther := eps.RelayToServer(ctx, b, "files", "prompts/list", nil)
	off := false
	if _, err := e.svc.UpdateServer(ctx, a, "files", mcpgate.ServerUpdate{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	_, disabled := eps.ServerEndpoint(ctx, a, "files")
	_, relayDisabled := eps.RelayToServer(ctx, a, "files", "prompts/list", nil)
	for name, err := range map[string]error{"missing": missing, "other": other, "relay other": relayOther, "disabled": disabled, "relay disabled": relayDisabled} {
		if mcpgate.ErrorCode(err) != mcpgate.ENotFound || mcpgate.ErrorMessage(err) != mcpgate.ErrorMessage(missing) {
			t.Errorf("%s err = %v, want the one not_found", name, err)
		}
	}
}
