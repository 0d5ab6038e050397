// Command sdkserver is the benchmark's reference for go-sdk's own cost: a
// minimal go-sdk v1.8 stateless streamable HTTP server with one typed tool,
// e2b_get_sandbox, that makes the same E2B GET as the gateway and returns its
// JSON as structured content. It runs at the default GC settings, with no
// authentication, policy, audit or logging: what any server written
// directly on the SDK pays per call, and no more.
//
// Imports from this module: bench/upstream.
package main

import (
	"context"
	"encoding/json"
	"log"
	"log/slog"
	"net/http"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/bench/upstream"
)

type getIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox ID"`
}

func main() {
	listen, e2b := upstream.Flags()
	quiet := slog.New(slog.DiscardHandler)
	s := sdk.NewServer(&sdk.Implementation{Name: "sdkserver", Version: "v0"}, &sdk.ServerOptions{Logger: quiet})
	sdk.AddTool(s, &sdk.Tool{Name: "e2b_get_sandbox", Description: "Get an E2B sandbox."},
		func(ctx context.Context, _ *sdk.CallToolRequest, in getIn) (*sdk.CallToolResult, any, error) {
			b, err := e2b.GetSandbox(ctx, in.SandboxID)
			if err != nil {
				return nil, nil, err
			}
			var out map[string]any
			if err := json.Unmarshal(b, &out); err != nil {
				return nil, nil, err
			}
			return nil, out, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s },
		&sdk.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true, Logger: quiet})
	srv := &http.Server{Addr: listen, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
