package e2b_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors/e2b"
)

// FuzzDecode feeds arbitrary arguments to every tool: decoding never panics,
// fails only with EInvalid, and what it accepts is an object that runs
// without an argument error.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{`{}`, `null`, ``, `[]`, `{"limit":101}`, `{"limit":1e400}`, `{"limit":-1}`,
		`{"sandbox_id":"iabcdefghij0123456789","memory":false}`, `{"state":"running","metadata":"a=b&c=%zz"}`,
		`{"cursor":9007199254740993}`, `{"timeout":"300"}`, `{"template_id":"e2b/base:v1","env_vars":{"A":"1"}}`,
		`{"started_after":"2026-01-01T00:00:00Z"}`, `{"window_minutes":10.5}`, `{"a":1}{"b":2}`, `"x"`} {
		f.Add(seed)
	}
	// Calls go to an address that refuses connections: only decoding matters.
	tools := e2b.New(e2b.Options{BaseURL: "http://127.0.0.1:1", Timeout: 100 * time.Millisecond}).Tools()
	f.Fuzz(func(t *testing.T, raw string) {
		for _, tl := range tools {
			args, err := tl.Decode(json.RawMessage(raw))
			if err != nil {
				if mcpgate.ErrorCode(err) != mcpgate.EInvalid {
					t.Fatalf("%s.Decode(%q) err = %v, want EInvalid", tl.Name, raw, err)
				}
				continue
			}
			if args == nil {
				t.Fatalf("%s.Decode(%q) = nil, nil", tl.Name, raw)
			}
			_, err = tl.CallDecoded(context.Background(), "e2b_00", args)
			if c := mcpgate.ErrorCode(err); c == mcpgate.EInternal {
				t.Fatalf("%s: accepted %q but the call failed internally: %v", tl.Name, raw, err)
			}
		}
	})
}
