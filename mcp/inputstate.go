package mcp

// The request state of an upstream's input_required result (2026-07-28's
// multi round-trip). An upstream tool that needs input from the caller's
// client (an elicitation, a sampling, the roots) answers its call with the
// input requests and a requestState of its own, which the client sends
// back, with its answers, when it retries the call. The gateway does not
// hand the upstream's state to the client as it is: it seals it in an
// envelope of its own (AES-256-GCM under a key derived from the
// confirmation secret, so any replica opens it) bound to the workspace,
// the credential, the person, the tool and the call's arguments, with an
// expiry, and opens it on the retry. So a state can neither be read by
// the client (it is the upstream's business) nor replayed by another
// caller, for another tool or other arguments, nor kept past its time;
// and the gateway's own request states (confirmations, approvals) are
// told apart by their prefix.

import (
	"cmp"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
)

const (
	// inputStatePrefix starts the envelopes of upstreams' request states.
	inputStatePrefix = "mcpgu1_"
	// inputStateTTL is how long a client may take to answer an upstream's
	// input requests: a person filling in a form.
	inputStateTTL = 15 * time.Minute
	// maxInputState bounds an envelope (and so the upstream's state in it).
	maxInputState = 16 << 10
)

// inputStateClaims are the sealed content of an envelope.
type inputStateClaims struct {
	Workspace  string `json:"w"`
	Credential string `json:"k"`
	User       string `json:"u"`
	Tool       string `json:"t"`
	Args       string `json:"h"`
	Expires    int64  `json:"e"`
	// Confirmed: the call the upstream asked input of had been confirmed
	// (a tool that needs confirmation): its retry needs none again.
	Confirmed bool `json:"c,omitempty"`
	// Approval: the approval a person gave for the call (used up by it),
	// which covers its retries (mcpgate.ToolCall.ContinuesApproval).
	Approval string `json:"a,omitempty"`
	// State is the upstream's own requestState ("" when it gave none).
	State string `json:"s,omitempty"`
	// Held names the call held on a replica for the upstream's request it
	// asks the caller about, and Round which of its requests that is
	// (heldcall.go); "" for an upstream's own input_required result.
	Held  string `json:"hc,omitempty"`
	Round int    `json:"hr,omitempty"`
	// Nonce makes the envelope single-use where a replay would do more
	// than the upstream's own state allows: one that carries a
	// confirmation or an approval (each retry would run the call again
	// under it), or a held call's round (spendInputState).
	Nonce string `json:"n,omitempty"`
}

// errSpentInputState answers a retry whose envelope was used already.
var errSpentInputState = mcpgate.Errorf(mcpgate.EForbidden,
	"This requestState was used already: a retry that answers input requests runs once. Call the tool again without it.")

// spendInputState spends a retry's envelope if it must be used once
// (see Nonce): a second retry with it is refused, on any replica.
func (g *Gateway) spendInputState(ctx context.Context, c *inputStateClaims) error {
	if c.Nonce == "" || g.opts.Tokens == nil {
		return nil
	}
	fresh, err := g.opts.Tokens.SpendToken(ctx, "input-state:"+c.Nonce, time.Unix(c.Expires, 0))
	if err != nil {
		return mcpgate.WrapError(mcpgate.EUnavailable, err, "the gateway cannot check this requestState right now; try again shortly")
	}
	if !fresh {
		return errSpentInputState
	}
	return nil
}

// inputStateAEAD is the cipher of the envelopes: its key is derived from
// the confirmation secret under a domain of its own.
func (g *Gateway) inputStateAEAD() cipher.AEAD {
	m := hmac.New(sha256.New, g.opts.ConfirmationSecret)
	m.Write([]byte("mcpgate upstream input state v1\x00"))
	block, _ := aes.NewCipher(m.Sum(nil)) // a 32-byte key never fails
	aead, _ := cipher.NewGCM(block)
	return aead
}

// sealInputState wraps the upstream's state for a's call of tool with
// args, and what the call was allowed by: its confirmation, or the
// approval it was made with (its own, or the one it continues).
func (g *Gateway) sealInputState(a *mcpgate.Actor, tool string, args map[string]any, call mcpgate.ToolCall, state string) string {
	return g.sealClaims(g.inputClaims(a, tool, args, call, state))
}

// inputClaims are the claims of an envelope for a's call of tool with
// args, made as call says.
func (g *Gateway) inputClaims(a *mcpgate.Actor, tool string, args map[string]any, call mcpgate.ToolCall, state string) inputStateClaims {
	return inputStateClaims{Workspace: a.WorkspaceID, Credential: a.CredentialID(), User: a.UserID,
		Tool: tool, Args: argsHash(args), Expires: g.now().Add(inputStateTTL).Unix(), Confirmed: call.Confirmed,
		Approval: cmp.Or(call.ApprovalID, call.ContinuesApproval), State: state}
}

// sealClaims seals an envelope, single-use where it must be (Nonce).
func (g *Gateway) sealClaims(c inputStateClaims) string {
	if c.Confirmed || c.Approval != "" || c.Held != "" {
		nonce := make([]byte, 16)
		_, _ = rand.Read(nonce)
		c.Nonce = base64.RawURLEncoding.EncodeToString(nonce)
	}
	payload, _ := json.Marshal(c)
	aead := g.inputStateAEAD()
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	sealed := aead.Seal(nonce, nonce, payload, []byte(inputStatePrefix))
	return inputStatePrefix + base64.RawURLEncoding.EncodeToString(sealed)
}

var errBadInputState = mcpgate.Errorf(mcpgate.EForbidden,
	"This requestState is not valid: it expired, or was issued for another call. Call the tool again without it.")

// isInputState reports whether a request state is an upstream's envelope.
func isInputState(s string) bool { return strings.HasPrefix(s, inputStatePrefix) }

// openInputState opens an envelope for a's call of tool with args; every
// failure reads the same.
func (g *Gateway) openInputState(token string, a *mcpgate.Actor, tool string, args map[string]any) (*inputStateClaims, error) {
	body, ok := strings.CutPrefix(token, inputStatePrefix)
	if !ok || len(token) > maxInputState {
		return nil, errBadInputState
	}
	sealed, err := base64.RawURLEncoding.DecodeString(body)
	aead := g.inputStateAEAD()
	if err != nil || len(sealed) < aead.NonceSize() {
		return nil, errBadInputState
	}
	payload, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(inputStatePrefix))
	if err != nil {
		return nil, errBadInputState
	}
	var c inputStateClaims
	if json.Unmarshal(payload, &c) != nil {
		return nil, errBadInputState
	}
	if c.Workspace != a.WorkspaceID || c.Credential != a.CredentialID() || c.User != a.UserID || c.Tool != tool ||
		!hmac.Equal([]byte(c.Args), []byte(argsHash(args))) || !g.now().Before(time.Unix(c.Expires, 0)) {
		return nil, errBadInputState
	}
	return &c, nil
}
