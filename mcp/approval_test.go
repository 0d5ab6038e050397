package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/testutil"
)

// TestApproval_URLRequestState drives the URL-mode input request by hand
// (multi round-trip off): the request state carries the approval to the
// retry only when this gateway signed it for this key, and the retry runs
// the call only once a person approved it, once, within ten minutes.
func TestApproval_URLRequestState(t *testing.T) {
	tg := newGWGateway(t)
	ctx := context.Background()
	human := mcpgate.ApprovalHuman
	if _, err := tg.Service.Tools.UpdateTool(ctx, tg.Owner(), "demo_delete", mcpgate.ToolUpdate{Approval: &human}); err != nil {
		t.Fatal(err)
	}
	key, _ := tg.AddKey(t, mcpgate.ScopeFull)
	key2, _ := tg.AddKey(t, mcpgate.ScopeFull)
	session := func(key string) *sdk.ClientSession {
		return tg.connect(t, key, "", &sdk.ClientOptions{
			Capabilities:   &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}},
			MultiRoundTrip: &sdk.MultiRoundTripOptions{Disabled: true},
			ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				return &sdk.ElicitResult{Action: "accept"}, nil
			}})
	}
	cs, cs2 := session(key), session(key2)
	accept := sdk.InputResponseMap{"approval": &sdk.ElicitResult{Action: "accept"}}
	ask := func(t *testing.T, id string) (string, string) {
		t.Helper()
		first := gwCall(t, cs, &sdk.CallToolParams{Name: "demo_delete", Arguments: map[string]any{"id": id}})
		ir, ok := first.InputRequests["approval"].(*sdk.ElicitParams)
		if !ok || ir.Mode != "url" || !strings.HasPrefix(ir.URL, "http://gateway.test/app/w/"+tg.Workspace+"/approvals/") ||
			!strings.HasSuffix(ir.URL, "/"+ir.ElicitationID) || first.RequestState == "" {
			t.Fatalf("first call = %+v, want a URL-mode input request for the approval page", first)
		}
		return ir.ElicitationID, first.RequestState
	}
	retry := func(cs *sdk.ClientSession, id, state string, answer sdk.InputResponseMap) *sdk.CallToolResult {
		return gwCall(t, cs, &sdk.CallToolParams{Name: "demo_delete", Arguments: map[string]any{"id": id},
			RequestState: state, InputResponses: answer})
	}

	approvalID, state := ask(t, "x1")
	if res := retry(cs, "x1", state, accept); !res.IsError || !strings.Contains(testutil.ToolText(res), "nobody has approved") {
		t.Errorf("retry before approval = %q", testutil.ToolText(res))
	}
	if _, err := tg.Service.Approvals.Approve(ctx, tg.Owner(), approvalID); err != nil {
		t.Fatal(err)
	}
	// A state altered by the client, or replayed by another key, carries no
	// approval: the call is a new one and asks again.
	forged := state[:len(state)-3] + "AAA"
	if forged == state {
		forged = state[:len(state)-3] + "BBB"
	}
	for name, try := range map[string]func() *sdk.CallToolResult{
		"forged state":      func() *sdk.CallToolResult { return retry(cs, "x1", forged, accept) },
		"another key's one": func() *sdk.CallToolResult { return retry(cs2, "x1", state, accept) },
	} {
		if res := try(); res.InputRequests["approval"] == nil {
			t.Errorf("%s: result %q, want a new input request", name, testutil.ToolText(res))
		}
	}
	if res := retry(cs, "x1", state, sdk.InputResponseMap{"approval": &sdk.ElicitResult{Action: "decline"}}); res.IsError ||
		!strings.Contains(testutil.ToolText(res), "Not done") {
		t.Errorf("declined = %q", testutil.ToolText(res))
	}
	if got := tg.conn.deletedIDs(); len(got) != 0 {
		t.Fatalf("deleted %v before an accepted retry", got)
	}
	if res := retry(cs, "x1", state, accept); res.IsError {
		t.Fatalf("approved retry = %q", testutil.ToolText(res))
	}
	if res := retry(cs, "x1", state, accept); !res.IsError || !strings.Contains(testutil.ToolText(res), "already used") {
		t.Errorf("second retry = %q", testutil.ToolText(res))
	}
	if got := tg.conn.deletedIDs(); len(got) != 1 {
		t.Fatalf("deleted %v, want x1 once", got)
	}

	// Approved, then the ten minutes pass.
	approvalID, state = ask(t, "x2")
	if _, err := tg.Service.Approvals.Approve(ctx, tg.Owner(), approvalID); err != nil {
		t.Fatal(err)
	}
	tg.clock.Advance(mcpgate.ApprovalTTL + time.Second)
	if res := retry(cs, "x2", state, accept); !res.IsError || !strings.Contains(testutil.ToolText(res), "expired") {
		t.Errorf("retry after expiry = %q", testutil.ToolText(res))
	}
	if got := tg.conn.deletedIDs(); len(got) != 1 {
		t.Fatalf("deleted %v after the expired retry", got)
	}
}

// TestApproval_LegacyClientGetsText: a client on 2025-11-25 (no input
// requests) gets the approval as words and an approval_id argument.
func TestApproval_LegacyClientGetsText(t *testing.T) {
	tg := newGWGateway(t)
	human := mcpgate.ApprovalHuman
	if _, err := tg.Service.Tools.UpdateTool(context.Background(), tg.Owner(), "demo_delete", mcpgate.ToolUpdate{Approval: &human}); err != nil {
		t.Fatal(err)
	}
	key, _ := tg.AddKey(t, mcpgate.ScopeFull)
	cs := tg.connect(t, key, "2025-11-25", nil)
	lt, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range lt.Tools {
		b, _ := json.Marshal(tl.InputSchema)
		var schema struct {
			Properties map[string]any `json:"properties"`
		}
		_ = json.Unmarshal(b, &schema)
		props := schema.Properties
		if tl.Name == "demo_delete" && (props["approval_id"] == nil || props["confirmation_token"] != nil) {
			t.Errorf("demo_delete schema properties = %v, want approval_id and no confirmation_token", props)
		}
	}
	res := gwCall(t, cs, &sdk.CallToolParams{Name: "demo_delete", Arguments: map[string]any{"id": "x1"}})
	out, _ := res.StructuredContent.(map[string]any)
	if res.IsError || out["status"] != "approval_required" || !strings.Contains(testutil.ToolText(res), "Please open http://gateway.test/app/w/") {
		t.Fatalf("legacy call = %q", testutil.ToolText(res))
	}
}
