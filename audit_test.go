package mcpgate_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcpgate/mcpgate"
)

func TestRedactArguments(t *testing.T) {
	key, _, _ := mcpgate.NewMCPKey()
	const jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	tests := []struct {
		name string
		in   map[string]any
		want map[string]any
	}{
		{name: "nested name", in: map[string]any{"metadata": map[string]any{"db_password": "hunter2", "team": "ml"}},
			want: map[string]any{"metadata": map[string]any{"db_password": mcpgate.Redacted, "team": "ml"}}},
		{name: "deeper name in an array", in: map[string]any{"rules": []any{map[string]any{"headers": map[string]any{"Authorization": "Basic abc"}}}},
			want: map[string]any{"rules": []any{map[string]any{"headers": map[string]any{"Authorization": mcpgate.Redacted}}}}},
		{name: "sensitive object keeps its names", in: map[string]any{"env_vars": map[string]any{"A": "1", "B": map[string]any{"C": 2.0}}},
			want: map[string]any{"env_vars": map[string]any{"A": mcpgate.Redacted, "B": map[string]any{"C": mcpgate.Redacted}}}},
		{name: "ids and hints kept", in: map[string]any{"key_id": "k1", "key_hint": "e2b_…9f3c"},
			want: map[string]any{"key_id": "k1", "key_hint": "e2b_…9f3c"}},
		{name: "e2b key under a harmless name", in: map[string]any{"cmd": "curl -H 'X-API-Key: e2b_0123456789abcdef0123456789abcdef01234567' api"},
			want: map[string]any{"cmd": mcpgate.RedactedSecretLooking}},
		{name: "mcp key", in: map[string]any{"note": key}, want: map[string]any{"note": mcpgate.RedactedSecretLooking}},
		{name: "openai key", in: map[string]any{"x": "sk-proj-AbCdEf0123456789xyz"}, want: map[string]any{"x": mcpgate.RedactedSecretLooking}},
		{name: "github token in array", in: map[string]any{"args": []any{"clone", "https://ghp_16C7e42F292c6912E7710c838347Ae178B4a@github.com/x/y"}},
			want: map[string]any{"args": []any{"clone", mcpgate.RedactedSecretLooking}}},
		{name: "jwt", in: map[string]any{"v": "Authorization " + jwt}, want: map[string]any{"v": mcpgate.RedactedSecretLooking}},
		{name: "long random", in: map[string]any{"v": "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1u"}, want: map[string]any{"v": mcpgate.RedactedSecretLooking}},
		{name: "uuid kept", in: map[string]any{"v": "3f2504e0-4f89-11d3-9a0c-0305e82c3301"}, want: map[string]any{"v": "3f2504e0-4f89-11d3-9a0c-0305e82c3301"}},
		{name: "path and words kept", in: map[string]any{"path": "/home/user/project/src/internal/service/accounts_test.go",
			"cmd": "python3 -m pip install --upgrade requests numpy pandas", "sandbox": "i1a2b3c4d5e6f7g8h9j0", "task": "disk-usage-report-for-yesterday"},
			want: map[string]any{"path": "/home/user/project/src/internal/service/accounts_test.go",
				"cmd": "python3 -m pip install --upgrade requests numpy pandas", "sandbox": "i1a2b3c4d5e6f7g8h9j0", "task": "disk-usage-report-for-yesterday"}},
		{name: "secret as a name", in: map[string]any{"m": map[string]any{key: "x"}},
			want: map[string]any{"m": map[string]any{mcpgate.RedactedSecretLooking: "x"}}},
		{name: "tool names kept", in: map[string]any{"tool": "e2b_kill_sandbox", "t2": "e2b_list_sandboxes_by_metadata"},
			want: map[string]any{"tool": "e2b_kill_sandbox", "t2": "e2b_list_sandboxes_by_metadata"}},
		{name: "numbers and bools", in: map[string]any{"n": 3.0, "b": true, "nil": nil}, want: map[string]any{"n": 3.0, "b": true, "nil": nil}},
		{name: "confirmation token dropped", in: map[string]any{"confirmation_token": "x", "a": "b"}, want: map[string]any{"a": "b"}},
		{name: "long string cut at depth", in: map[string]any{"m": map[string]any{"s": strings.Repeat("a b ", 100)}},
			want: map[string]any{"m": map[string]any{"s": strings.Repeat("a b ", 64) + "…"}}},
		// Names are cut like values, at every depth, at a
		// character boundary.
		{name: "long name cut", in: map[string]any{strings.Repeat("n", 5000): "v"},
			want: map[string]any{strings.Repeat("n", 128) + "…": "v"}},
		{name: "long nested name cut", in: map[string]any{"m": []any{map[string]any{strings.Repeat("é", 100): 1.0}}},
			want: map[string]any{"m": []any{map[string]any{strings.Repeat("é", 64) + "…": 1.0}}}},
		{name: "long name under a sensitive name cut", in: map[string]any{"env_vars": map[string]any{strings.Repeat("K", 300): "v"}},
			want: map[string]any{"env_vars": map[string]any{strings.Repeat("K", 128) + "…": mcpgate.Redacted}}},
		// A URL's password, at any depth, in any string.
		{name: "url password", in: map[string]any{"dsn": "postgres://u:pw@h/db"}, want: map[string]any{"dsn": "postgres://u:" + mcpgate.Redacted + "@h/db"}},
		{name: "url password in a command, nested", in: map[string]any{"a": []any{map[string]any{"cmd": "psql 'postgresql://app:s3cr3t@db.internal:5432/prod?sslmode=require' -c 'select 1'"}}},
			want: map[string]any{"a": []any{map[string]any{"cmd": "psql 'postgresql://app:" + mcpgate.Redacted + "@db.internal:5432/prod?sslmode=require' -c 'select 1'"}}}},
		{name: "url password with an @ in it", in: map[string]any{"u": "redis://:p@ss@cache:6379/0 and https://a:b@x"},
			want: map[string]any{"u": "redis://:" + mcpgate.Redacted + "@cache:6379/0 and https://a:" + mcpgate.Redacted + "@x"}},
		{name: "urls without a password kept", in: map[string]any{"u": "https://host:8443/path?q=a:b@c ssh://git@github.com/x"},
			want: map[string]any{"u": "https://host:8443/path?q=a:b@c ssh://git@github.com/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, mcpgate.RedactArguments(tt.in)); diff != "" {
				t.Errorf("RedactArguments() diff (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRedactArguments_RowCap: a call's arguments, as
// stored, stay within MaxArgumentsBytes however many there are; the largest
// are left out first, and a marker says how many and how big. Before, one
// refused call with many long names wrote a 480 KB row.
func TestRedactArguments_RowCap(t *testing.T) {
	in := map[string]any{"small": "kept", "n": 1.0}
	for i := range 2000 {
		in[fmt.Sprintf("arg%04d_%s", i, strings.Repeat("x", 200))] = strings.Repeat("v", 300)
	}
	out := mcpgate.RedactArguments(in)
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > mcpgate.MaxArgumentsBytes {
		t.Fatalf("stored arguments = %d bytes, want at most %d", len(b), mcpgate.MaxArgumentsBytes)
	}
	if out["small"] != "kept" || out["n"] != 1.0 {
		t.Errorf("the small arguments were left out: %v, %v", out["small"], out["n"])
	}
	marker, _ := out[mcpgate.ArgumentsCut].(string)
	if !strings.Contains(marker, "of 2002 arguments left out") {
		t.Errorf("marker = %q, want it to say how many of the 2002 were left out", marker)
	}
	t.Logf("2002 arguments, %d bytes as stored; marker %q", len(b), marker)

	// One huge nested argument is left out whole; the others stay.
	nested := map[string]any{}
	for i := range 500 {
		nested[fmt.Sprintf("k%d", i)] = strings.Repeat("w", 250)
	}
	out = mcpgate.RedactArguments(map[string]any{"big": nested, "tool": "e2b_list_sandboxes"})
	if _, ok := out["big"]; ok || out["tool"] != "e2b_list_sandboxes" || out[mcpgate.ArgumentsCut] == nil {
		t.Errorf("RedactArguments(one huge argument) = %d entries, big kept %v; want it left out with the marker", len(out), ok)
	}
	// Under the cap nothing changes and no marker is added.
	if out := mcpgate.RedactArguments(map[string]any{"a": "b"}); len(out) != 1 {
		t.Errorf("small arguments got %v", out)
	}
}

// TestNewToolEvent_NameCut: a tool name is the client's to choose, and is
// cut like any name.
func TestNewToolEvent_NameCut(t *testing.T) {
	ev := mcpgate.NewToolEvent(&mcpgate.Actor{WorkspaceID: "w"}, strings.Repeat("t", 100_000), nil)
	if len(ev.Action) > 128+len("…") {
		t.Errorf("Action = %d bytes, want it cut to 128", len(ev.Action))
	}
}

// FuzzRedactArguments checks that no planted secret survives redaction,
// wherever it sits in the arguments and whatever it is called.
func FuzzRedactArguments(f *testing.F) {
	f.Add(`{"a":{"b":[{"c":"%s"}]}}`, "e2b_0123456789abcdef0123456789abcdef01234567")
	f.Add(`{"metadata":{"db_password":"%s"}}`, "short")
	f.Add(`{"m":{"%s":1}}`, "mcpg_abcdefghijkl_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG")
	f.Add(`{"x":["%s"]}`, "ghp_16C7e42F292c6912E7710c838347Ae178B4a")
	f.Fuzz(func(t *testing.T, shape, secret string) {
		if !strings.Contains(shape, "%s") || strings.Count(shape, "%") != 1 {
			return
		}
		enc, _ := json.Marshal(secret)
		var args map[string]any
		if err := json.Unmarshal([]byte(strings.Replace(shape, "%s", string(enc[1:len(enc)-1]), 1)), &args); err != nil {
			return
		}
		out, _ := json.Marshal(mcpgate.RedactArguments(args))
		// Only secrets the redaction promises to catch are checked: those
		// that look like one.
		if mcpgate.LooksSecret(secret) && strings.Contains(string(out), secret) {
			t.Fatalf("RedactArguments(%s) = %s keeps %q", shape, out, secret)
		}
		// And a value under a credential name at any depth.
		if strings.Contains(shape, `"db_password":"%s"`) && len(secret) > 0 && strings.Contains(string(out), string(enc)) && string(enc) != `"[redacted]"` {
			t.Fatalf("RedactArguments(%s) = %s keeps the password", shape, out)
		}
	})
}
