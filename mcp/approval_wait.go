package mcp

import (
	"context"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

// The wait for a person's decision. Where the workspace sets an approval
// wait, a call that needs a human approval holds open until a person decides
// in the dashboard (on any replica) or the wait is over, telling a client
// that sent a progress token that it is still waiting. Approved, it runs in
// the same call: the call is made again with the approval's id, through the
// tool service exactly as a retry with approval_id (policy, guardrails,
// audit, the approval spent once). Denied, the same retry answers with the
// refusal. Undecided, the answer is the link, as without a wait, and the
// approval stays open for a retry.

// requestKey keeps the HTTP request's own context among the handler's
// context values: go-sdk does not cancel a legacy stateless call's handler
// when its client goes away (go-sdk #1093), but a wait for a person must end
// then, or each abandoned call would hold its place for the whole wait.
type requestKey struct{}

// withRequestContext marks ctx, the HTTP request's, as the one whose end
// means the client went away.
func withRequestContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, requestKey{}, ctx)
}

func requestContext(ctx context.Context) context.Context {
	rc, _ := ctx.Value(requestKey{}).(context.Context)
	return rc
}

// awaitApproval waits for a person's decision on the approval a call
// needs, as long as the workspace allows: nil when it was decided (the
// caller makes the call again with the approval's id, which answers a
// denial too), else the answer with the link.
func (g *Gateway) awaitApproval(ctx context.Context, req *sdk.CallToolRequest, a *mcpgate.Actor,
	need *mcpgate.ApprovalRequiredError) *sdk.CallToolResult {
	if g.opts.Approvals == nil || asksByURL(req) {
		// A client that gets the page as a URL-mode input request shows it
		// at once and comes back by itself once the person is done: holding
		// its call would only hide the page from the person meanwhile.
		return g.askApproval(req, a, need, "")
	}
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if rc := requestContext(ctx); rc != nil {
		// No goroutine: AfterFunc runs cancel only if the request ends
		// during the wait, and stop unhooks it when the wait is over.
		stop := context.AfterFunc(rc, cancel)
		defer stop()
	}
	state, err := g.opts.Approvals.AwaitApproval(waitCtx, a, need.Approval, g.waitProgress(waitCtx, req, need.Approval))
	if err != nil {
		if mcpgate.ErrorCode(err) != mcpgate.ETooMany {
			g.log.WarnContext(ctx, "approval wait", "workspace_id", a.WorkspaceID, "approval_id", need.Approval.ID, "err", err)
		}
		return g.askApproval(req, a, need, mcpgate.ErrorMessage(err))
	}
	if state == mcpgate.ApprovalPending {
		return g.askApproval(req, a, need, "")
	}
	return nil
}

// waitProgress tells a client that sent a progress token that the call is
// waiting, and where a person decides; nil when it sent none.
func (g *Gateway) waitProgress(ctx context.Context, req *sdk.CallToolRequest, ap *mcpgate.ApprovalRequest) func(waited, wait time.Duration) error {
	tok := req.Params.GetProgressToken()
	if tok == nil || req.Session == nil {
		return nil
	}
	msg := "Waiting for a person to approve or deny this in the mcpgate dashboard: " + ap.URL
	return func(waited, wait time.Duration) error {
		return req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok,
			Progress: waited.Seconds(), Total: wait.Seconds(), Message: msg})
	}
}
