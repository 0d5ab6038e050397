package e2b_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors/e2b"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
)

func TestConnector_CheckCredential(t *testing.T) {
	e := newEnv(t, e2bsim.Options{TeamKeys: []string{testKey.Reveal()}})
	tests := []struct {
		name     string
		key      string
		fault    *e2bsim.Fault
		wantCode mcpgate.Code
		wantText string
	}{
		{name: "valid", key: testKey.Reveal()},
		{name: "personal access token", key: "sk_e2b_0123abcd", wantCode: mcpgate.EInvalid, wantText: "team API key"},
		{name: "wrong shape", key: "e2b_XYZ", wantCode: mcpgate.EInvalid, wantText: "e2b_ followed by hex"},
		{name: "empty", key: "", wantCode: mcpgate.EInvalid},
		{name: "unknown key", key: "e2b_ffff", wantCode: mcpgate.EInvalid, wantText: "E2B rejected this key"},
		{name: "E2B down", key: testKey.Reveal(), fault: &e2bsim.Fault{Status: 503}, wantCode: mcpgate.EUnavailable},
		{name: "E2B failing", key: testKey.Reveal(), fault: &e2bsim.Fault{Status: 500}, wantCode: mcpgate.EUnavailable},
		{name: "unreachable", key: testKey.Reveal(), fault: &e2bsim.Fault{Reset: true}, wantCode: mcpgate.EUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.fault != nil {
				defer e.sim.Inject(*tt.fault)()
			}
			err := e.conn.CheckCredential(context.Background(), mcpgate.Secret(tt.key))
			if got := mcpgate.ErrorCode(err); got != tt.wantCode {
				t.Fatalf("CheckCredential() err = %v, want code %q", err, tt.wantCode)
			}
			if !strings.Contains(mcpgate.ErrorMessage(err), tt.wantText) {
				t.Errorf("message = %q, want %q", mcpgate.ErrorMessage(err), tt.wantText)
			}
			if tt.key != "" && err != nil && strings.Contains(err.Error(), tt.key) {
				t.Errorf("error carries the key: %v", err)
			}
		})
	}
}

func TestConnector_CredentialHint(t *testing.T) {
	c := e2b.New(e2b.Options{})
	if c.Name() != "e2b" {
		t.Errorf("Name() = %q", c.Name())
	}
	if got := c.CredentialHint("e2b_0123456789ab9f3c"); got != "e2b_…9f3c" {
		t.Errorf("CredentialHint() = %q", got)
	}
	if got := c.CredentialHint("e2b_1"); got != "e2b_…" {
		t.Errorf("CredentialHint(short) = %q", got)
	}
}
