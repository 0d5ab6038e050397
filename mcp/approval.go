package mcp

import (
	"context"
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

// The MCP side of a human approval. The tool service decides that a person
// must approve a call and stores the request; this tells the client: as a
// URL-mode input request to 2026-07-28 clients that declare URL
// elicitation, as words for the model to pass on to everyone else. The
// approval itself is given in the dashboard and spent by the tool service,
// so nothing here can make a call run that a person did not approve.

const (
	approvalArg = "approval_id"
	// purposeApproval marks the request state of a URL-mode input request:
	// it carries the approval's id through the client, signed so that a
	// client cannot point the retry at another approval.
	purposeApproval = "approval"
	// approvalInput is the key of the URL-mode input request.
	approvalInput = "approval"
)

// approvalInstructions are the gateway's part of the server instructions
// about human approvals.
const approvalInstructions = `Some calls need a person to approve them in the mcpgate dashboard: such a call returns
status approval_required with an approval_url and an approval_id instead of acting. Ask the user
to open the URL and approve or deny it there; only after they say they approved, call the same
tool again with the same arguments plus that approval_id. You cannot approve it yourself.
A workspace may have such a call wait up to a minute for the decision: if a person approves
meanwhile, the call returns the tool's real result; if they deny it, an error saying so.`

// mintApprovalState signs the approval id for the retry of a URL-mode input
// request, bound to the workspace, credential (key or grant), user and tool.
func (g *Gateway) mintApprovalState(a *mcpgate.Actor, tool string, ap *mcpgate.ApprovalRequest) string {
	// The approval's id rides in the nonce field; it needs no secrecy of
	// its own, only the signature's binding to this caller.
	payload, _ := json.Marshal(tokenClaims{Purpose: purposeApproval, Workspace: a.WorkspaceID, Key: a.CredentialID(), User: a.UserID,
		Tool: tool, Expires: ap.ExpiresAt.Unix(), Nonce: ap.ID})
	enc := base64.RawURLEncoding
	return tokenPrefix + enc.EncodeToString(payload) + "." + enc.EncodeToString(g.mac(payload))
}

// openApprovalState returns the approval id of a request state this
// gateway signed for this caller and tool, or "" when it is none. It
// spends nothing: the approval itself is single-use in the database.
func (g *Gateway) openApprovalState(state string, a *mcpgate.Actor, tool string) string {
	body, ok := cutTokenPrefix(state)
	if !ok || len(state) > 2048 {
		return ""
	}
	p64, m64, ok := strings.Cut(body, ".")
	if !ok {
		return ""
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.DecodeString(m64)
	if err1 != nil || err2 != nil || !hmac.Equal(sig, g.mac(payload)) {
		return ""
	}
	var gr tokenClaims
	if json.Unmarshal(payload, &gr) != nil || gr.Purpose != purposeApproval || gr.Workspace != a.WorkspaceID ||
		gr.Key != a.CredentialID() || gr.User != a.UserID || gr.Tool != tool {
		return ""
	}
	return gr.Nonce
}

// approvalRetry handles the second round of a URL-mode input request. It
// returns the approval id to call with, or the result to send instead.
func (g *Gateway) approvalRetry(ctx context.Context, req *sdk.CallToolRequest, a *mcpgate.Actor, tool string) (string, *sdk.CallToolResult, bool) {
	p := req.Params
	if p.RequestState == "" {
		return "", nil, false
	}
	id := g.openApprovalState(p.RequestState, a, tool)
	if id == "" {
		return "", nil, false
	}
	r, ok := p.InputResponses[approvalInput].(*sdk.ElicitResult)
	if !ok || r.Action != "accept" {
		ev := mcpgate.NewToolEvent(a, tool, nil)
		ev.Outcome, ev.Message = mcpgate.OutcomeCancelled, "the user did not open the approval page"
		g.audit.Record(ctx, ev)
		return "", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "Not done: the user did not open the approval " +
			"page. The request stays open for a few minutes; call " + tool + " again with approval_id \"" + id + "\" once they approved it."}}}, true
	}
	return id, nil, true
}

// asksByURL reports whether a call's client gets an approval as a URL-mode
// input request: it speaks 2026-07-28 and declares URL elicitation.
func asksByURL(req *sdk.CallToolRequest) bool {
	if req.ProtocolVersion() < mrtrProtocol {
		return false
	}
	c := req.ClientCapabilities()
	return c != nil && c.Elicitation != nil && c.Elicitation.URL != nil
}

// askApproval answers a call that now waits for a person.
// A note, when set, says why the call did not wait for the decision.
func (g *Gateway) askApproval(req *sdk.CallToolRequest, a *mcpgate.Actor, need *mcpgate.ApprovalRequiredError, note string) *sdk.CallToolResult {
	ap, t := need.Approval, need.Tool
	if asksByURL(req) {
		return &sdk.CallToolResult{
			InputRequests: sdk.InputRequestMap{approvalInput: &sdk.ElicitParams{Mode: "url", URL: ap.URL, ElicitationID: ap.ID,
				Message: "A person must approve this in the mcpgate dashboard before it runs: " + ap.Summary +
					" Open the page, check it, and approve or deny it there; then come back here."}},
			RequestState: g.mintApprovalState(a, t.Name, ap),
		}
	}
	exp := ap.ExpiresAt.UTC().Format(time.RFC3339)
	words := fmt.Sprintf("Nothing was done yet: this workspace needs a person to approve this call in the mcpgate dashboard. "+
		"Tell the user: \"Please open %s to check and approve (or deny) this: %s\" After they tell you they approved it, call %s "+
		"again with exactly the same arguments plus \"approval_id\": %q. The approval works once and expires at %s (%d minutes). "+
		"You cannot approve it yourself.", ap.URL, ap.Summary, t.Name, ap.ID, exp, int(mcpgate.ApprovalTTL/time.Minute))
	if note != "" {
		words += " " + note
	}
	out := map[string]any{
		"status":       "approval_required",
		"done":         false,
		"tool":         t.Name,
		"would_do":     ap.Summary,
		"arguments":    ap.Arguments,
		"approval_id":  ap.ID,
		"approval_url": ap.URL,
		"expires_at":   exp,
		"next_step":    words,
	}
	if note != "" {
		out["not_waited"] = note
	}
	b, _ := json.Marshal(out)
	return &sdk.CallToolResult{StructuredContent: json.RawMessage(b), Content: []sdk.Content{&sdk.TextContent{Text: words}}}
}
