package mcp

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
)

// TestInputState_BoundToTheCall: an upstream's request state goes out
// sealed (its text nowhere in the envelope) and opens only for the same
// workspace, credential, person, tool and arguments, before its expiry;
// a tampered or foreign envelope, and the gateway's own request states,
// are the one refusal.
func TestInputState_BoundToTheCall(t *testing.T) {
	g, id, args := newRedeemGateway(t)
	const upstreamState = "upstream-secret-state-1234"
	env := g.sealInputState(id, "files_write", args, mcpgate.ToolCall{Confirmed: true}, upstreamState)
	if !isInputState(env) || strings.Contains(env, upstreamState) {
		t.Fatalf("envelope %q: want the prefix %s and the upstream's state not readable", env, inputStatePrefix)
	}
	c, err := g.openInputState(env, id, "files_write", map[string]any{"sandbox_id": "iabc123"})
	if err != nil || c.State != upstreamState || !c.Confirmed {
		t.Fatalf("open = %+v, %v; want the upstream's state and confirmed", c, err)
	}
	other := func(f func(a *mcpgate.Actor)) *mcpgate.Actor {
		a := *id
		f(&a)
		return &a
	}
	mine, _ := g.mint(purposeState, id, "files_write", args)
	for name, tc := range map[string]struct {
		env  string
		a    *mcpgate.Actor
		tool string
		args map[string]any
	}{
		"another workspace":  {env, other(func(a *mcpgate.Actor) { a.WorkspaceID = "ws-2" }), "files_write", args},
		"another key":        {env, other(func(a *mcpgate.Actor) { a.KeyID = "key2" }), "files_write", args},
		"another person":     {env, other(func(a *mcpgate.Actor) { a.UserID = "user-2" }), "files_write", args},
		"another tool":       {env, id, "files_delete", args},
		"other arguments":    {env, id, "files_write", map[string]any{"sandbox_id": "iother"}},
		"tampered":           {env[:len(env)-2] + "AA", id, "files_write", args},
		"the gateway's own":  {mine, id, "files_write", args},
		"empty":              {inputStatePrefix, id, "files_write", args},
		"not base64":         {inputStatePrefix + "%%%", id, "files_write", args},
		"longer than bounds": {inputStatePrefix + strings.Repeat("A", maxInputState), id, "files_write", args},
	} {
		if _, err := g.openInputState(tc.env, tc.a, tc.tool, tc.args); !errors.Is(err, errBadInputState) {
			t.Errorf("%s: err = %v, want the one refusal", name, err)
		}
	}
	clock := g.now
	g.now = func() time.Time { return clock().Add(inputStateTTL + time.Second) }
	defer func() { g.now = clock }()
	if _, err := g.openInputState(env, id, "files_write", args); !errors.Is(err, errBadInputState) {
		t.Fatalf("past its expiry: err = %v, want refused", err)
	}
}

// FuzzOpenInputState presents arbitrary request states: only an envelope
// this gateway sealed for exactly this call opens, and nothing panics.
func FuzzOpenInputState(f *testing.F) {
	g, id, args := newRedeemGateway(f)
	valid := g.sealInputState(id, "files_write", args, mcpgate.ToolCall{}, "s")
	f.Add(valid)
	f.Add(g.sealInputState(id, "files_other", args, mcpgate.ToolCall{}, "s"))
	f.Add(inputStatePrefix)
	f.Add(valid + "A")
	f.Fuzz(func(t *testing.T, env string) {
		c, err := g.openInputState(env, id, "files_write", args)
		if err == nil && (c.Tool != "files_write" || c.User != id.UserID || c.Workspace != id.WorkspaceID) {
			t.Fatalf("opened %q for %+v", env, c)
		}
		if err != nil && !errors.Is(err, errBadInputState) {
			t.Fatalf("err = %v, want the one refusal", err)
		}
	})
}
