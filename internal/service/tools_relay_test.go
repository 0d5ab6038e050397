package service

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// TestHeaderRedactor_InJSON: the server's credential is replaced in the
// JSON text of a relayed request also where JSON escapes some of its
// characters, and in a decoded message.
func TestHeaderRedactor_InJSON(t *testing.T) {
	const secret = `tok&en"with\back<slash>`
	redact := headerRedactor(upstream.Target{Headers: map[string]mcpgate.Secret{"Authorization": "Bearer " + secret}})
	params, _ := json.Marshal(map[string]string{"message": "my key is " + secret})
	out := redact(string(params))
	var back map[string]string
	if err := json.Unmarshal([]byte(out), &back); err != nil || strings.Contains(back["message"], "tok&en") {
		t.Fatalf("redacted params %s (%v): want valid JSON without the credential", out, err)
	}
	if got := redact("my key is " + secret); strings.Contains(got, "tok&en") {
		t.Fatalf("redacted message %q still holds the credential", got)
	}
}
