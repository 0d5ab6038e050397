package mcp

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// heldCallRPC posts a 2026-07-28 tools/call of lookup, with elicitation
// declared, and extra params (a retry's), and returns the result.
func heldCallRPC(t *testing.T, url, key, extra string) map[string]any {
	t.Helper()
	return newProtocolCall(t, url, key, `{"elicitation":{}}`, extra)
}

// newProtocolCall posts a 2026-07-28 tools/call of lookup whose client
// declares caps, with extra params, and returns the result.
func newProtocolCall(t *testing.T, url, key, caps, extra string) map[string]any {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup","arguments":{}` + extra + `,"_meta":{"` +
		sdk.MetaKeyProtocolVersion + `":"` + newProtocol + `","` + sdk.MetaKeyClientCapabilities + `":` + caps + `,"` +
		sdk.MetaKeyClientInfo + `":{"name":"t","version":"1"}}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", newProtocol)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "lookup")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	text := string(b)
	if i := strings.Index(text, "data: "); i >= 0 {
		text = strings.TrimSpace(text[i+len("data: "):])
	}
	var m struct {
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal([]byte(text), &m); err != nil || m.Result == nil {
		t.Fatalf("answer %q: %v", b, err)
	}
	return m.Result
}

// A 2026-07-28 caller's call whose upstream asks it mid-call is held: the
// caller gets the request as an input_required result under the gateway's
// input id, and its retry, with the answer under that id, reaches the
// waiting request and gets the call's result. A retry without the answer
// is told so and leaves the call held; one under another key does not
// open the state.
func TestHeldCall_AskedByInputRequired(t *testing.T) {
	tools := newRelayTools()
	url, g := relayReplica(t, tools, nil)
	first := heldCallRPC(t, url, "good-key", "")
	if n := g.HeldCalls(); n != 1 {
		t.Errorf("HeldCalls() = %d while the call waits for the retry, want 1", n)
	}
	asked, _ := first["inputRequests"].(map[string]any)["mcpgate"].(map[string]any)
	state, _ := first["requestState"].(string)
	if first["resultType"] != "input_required" || asked["method"] != "elicitation/create" || !strings.HasPrefix(state, inputStatePrefix) {
		t.Fatalf("first answer = %v, want the upstream's elicitation as an input request with a sealed state", first)
	}
	if params, _ := json.Marshal(asked["params"]); !strings.Contains(string(params), "Your name?") {
		t.Errorf("the input request's params = %s", params)
	}
	withState := `,"requestState":"` + state + `"`
	if res := heldCallRPC(t, url, "good-key", withState); res["isError"] != true ||
		!strings.Contains(res["content"].([]any)[0].(map[string]any)["text"].(string), "no answer") {
		t.Fatalf("a retry without the answer = %v, want it told", res)
	}
	if res := heldCallRPC(t, url, "second-key", withState+`,"inputResponses":{"mcpgate":{"action":"decline"}}`); res["isError"] != true {
		t.Fatalf("a retry under another key = %v, want it refused", res)
	}
	res := heldCallRPC(t, url, "good-key", withState+`,"inputResponses":{"mcpgate":{"action":"accept","content":{"name":"Ada"}}}`)
	if res["isError"] == true || res["resultType"] == "input_required" {
		t.Fatalf("the retry = %v, want the call's result", res)
	}
	o := tools.outcome(t)
	if o.err != nil || !strings.Contains(string(o.result), `"Ada"`) {
		t.Errorf("the upstream's request was answered %s, %v; want the retry's answer", o.result, o.err)
	}
	waitUntil(t, "the held call's slot given back", func() bool { return g.HeldCalls() == 0 })
}
