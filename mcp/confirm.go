package mcp

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

const (
	confirmationArg = "confirmation_token"
	// confirmationTTL is how long a confirmation token or request state is
	// valid.
	confirmationTTL = 5 * time.Minute
	// tokenPrefix starts confirmation tokens and request states; OAuth
	// client ids have their own, "mcpc_" (internal/oauth), which these
	// tokens carried before and which an older replica may still mint
	// during a rolling upgrade, so it is accepted too (cutTokenPrefix).
	tokenPrefix       = "mcpct_"
	legacyTokenPrefix = "mcpc_"
	// mrtrProtocol is the first protocol version whose clients answer input
	// requests by retrying the call (multi round-trip).
	mrtrProtocol = "2026-07-28"
)

// Token purposes: a confirmation token for the two-step flow, or the request
// state of an input request.
const (
	purposeConfirm = "confirm"
	purposeState   = "state"
)

// tokenClaims is the signed content of a confirmation token or request
// state. It binds the confirmation to one workspace, key, user, tool and the
// exact arguments (their hash), for a short time, once (the nonce is spent).
// (Not an OAuth grant, mcpgate.Grant: nothing is stored.)
type tokenClaims struct {
	Purpose   string `json:"p"`
	Workspace string `json:"w"`
	Key       string `json:"k"`
	User      string `json:"u"`
	Tool      string `json:"t"`
	Args      string `json:"h"`
	Expires   int64  `json:"e"`
	Nonce     string `json:"n"`
}

func argsHash(args map[string]any) string {
	// json.Marshal sorts map keys, so equal arguments hash equally.
	b, _ := json.Marshal(args)
	h := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(h[:])
}

func (g *Gateway) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, g.opts.ConfirmationSecret)
	m.Write([]byte("mcpgate confirmation v1\x00"))
	m.Write(payload)
	return m.Sum(nil)
}

func (g *Gateway) mint(purpose string, id *mcpgate.Actor, tool string, args map[string]any) (string, time.Time) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	exp := g.now().Add(confirmationTTL).Truncate(time.Second)
	payload, _ := json.Marshal(tokenClaims{Purpose: purpose, Workspace: id.WorkspaceID, Key: id.CredentialID(), User: id.UserID,
		Tool: tool, Args: argsHash(args), Expires: exp.Unix(), Nonce: base64.RawURLEncoding.EncodeToString(nonce)})
	enc := base64.RawURLEncoding
	return tokenPrefix + enc.EncodeToString(payload) + "." + enc.EncodeToString(g.mac(payload)), exp
}

// cutTokenPrefix returns a token or request state without its prefix, the
// current one or the one tokens had before (they live minutes, so the
// legacy one can go in the release after).
func cutTokenPrefix(token string) (string, bool) {
	if body, ok := strings.CutPrefix(token, tokenPrefix); ok {
		return body, true
	}
	return strings.CutPrefix(token, legacyTokenPrefix)
}

var errBadConfirmation = mcpgate.Errorf(mcpgate.EForbidden,
	"This confirmation is not valid: it is expired, already used, or was issued for another call. "+
		"Call the tool again without confirmation_token to get a new one, and ask the user again.")

// redeem checks a token or request state against this exact call and spends
// it. Every failure reads the same, so a token cannot be probed.
func (g *Gateway) redeem(ctx context.Context, purpose, token string, id *mcpgate.Actor, tool string, args map[string]any) error {
	body, ok := cutTokenPrefix(token)
	if !ok || len(token) > 2048 {
		return errBadConfirmation
	}
	p64, m64, ok := strings.Cut(body, ".")
	if !ok {
		return errBadConfirmation
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.DecodeString(m64)
	if err1 != nil || err2 != nil || !hmac.Equal(sig, g.mac(payload)) {
		return errBadConfirmation
	}
	var gr tokenClaims
	if err := json.Unmarshal(payload, &gr); err != nil {
		return errBadConfirmation
	}
	exp := time.Unix(gr.Expires, 0)
	if gr.Purpose != purpose || gr.Workspace != id.WorkspaceID || gr.Key != id.CredentialID() || gr.User != id.UserID ||
		gr.Tool != tool || !hmac.Equal([]byte(gr.Args), []byte(argsHash(args))) || !g.now().Before(exp) {
		return errBadConfirmation
	}
	fresh, err := g.opts.Tokens.SpendToken(ctx, purpose+":"+gr.Nonce, exp)
	if err != nil {
		return mcpgate.WrapError(mcpgate.EUnavailable, err, "the gateway cannot check confirmations right now; try again shortly")
	}
	if !fresh {
		return errBadConfirmation
	}
	return nil
}

// confirm enforces confirmation for a call the tool service says needs it.
// It returns nil when the call may now run, or the result to send instead:
// an input request, a confirmation token, a refusal, or the user's "no".
func (g *Gateway) confirm(ctx context.Context, req *sdk.CallToolRequest, id *mcpgate.Actor, need *mcpgate.ConfirmationRequiredError, token string) *sdk.CallToolResult {
	p := req.Params
	t, args := need.Tool, need.Arguments
	deny := func(outcome mcpgate.Outcome, msg string, isErr bool) *sdk.CallToolResult {
		ev := mcpgate.NewToolEvent(id, t.Name, args)
		ev.Outcome, ev.Message = outcome, msg
		g.audit.Record(ctx, ev)
		g.metrics.ToolCall(t.Name, outcome, 0, 0)
		if isErr {
			return errorResult(msg)
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
	}
	asked := func() {
		ev := mcpgate.NewToolEvent(id, t.Name, args)
		ev.Outcome = mcpgate.OutcomeConfirm
		g.audit.Record(ctx, ev)
	}
	// Second round of an input request: the client answered our form.
	if p.RequestState != "" {
		if err := g.redeem(ctx, purposeState, p.RequestState, id, t.Name, args); err != nil {
			return deny(mcpgate.OutcomeDenied, mcpgate.ErrorMessage(err), true)
		}
		r, ok := p.InputResponses["confirm"].(*sdk.ElicitResult)
		if !ok || r.Action != "accept" || r.Content["confirm"] != true {
			return deny(mcpgate.OutcomeCancelled, "Not done: the user did not confirm "+t.Title+".", false)
		}
		return nil
	}
	if token != "" {
		if err := g.redeem(ctx, purposeConfirm, token, id, t.Name, args); err != nil {
			return deny(mcpgate.OutcomeDenied, mcpgate.ErrorMessage(err), true)
		}
		return nil
	}
	if req.ProtocolVersion() >= mrtrProtocol {
		if c := req.ClientCapabilities(); c != nil && c.Elicitation != nil {
			state, _ := g.mint(purposeState, id, t.Name, args)
			asked()
			return &sdk.CallToolResult{
				InputRequests: sdk.InputRequestMap{"confirm": &sdk.ElicitParams{
					Message: need.Summary + "\n\nDo you want to go ahead?",
					RequestedSchema: &jsonschema.Schema{Type: "object", Required: []string{"confirm"},
						Properties: map[string]*jsonschema.Schema{"confirm": {Type: "boolean", Title: "Yes, go ahead",
							Description: "Confirm " + t.Title}}},
				}},
				RequestState: state,
			}
		}
	}
	tok, exp := g.mint(purposeConfirm, id, t.Name, args)
	asked()
	out := map[string]any{
		"status":             "confirmation_required",
		"done":               false,
		"tool":               t.Name,
		"would_do":           need.Summary,
		"arguments":          mcpgate.RedactArguments(args),
		"confirmation_token": tok,
		"expires_at":         exp.UTC().Format(time.RFC3339),
		"next_step": "Nothing was done yet. Show the user what would happen and ask them to confirm. Only if they agree, " +
			"call " + t.Name + " again with exactly the same arguments plus confirmation_token. The token works once and expires in 5 minutes.",
	}
	b, _ := json.Marshal(out)
	return &sdk.CallToolResult{StructuredContent: json.RawMessage(b), Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}
}
