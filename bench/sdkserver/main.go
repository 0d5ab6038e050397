// Command sdkserver is the benchmark's reference for go-sdk's own cost: a
// minimal go-sdk v1.8 stateless streamable HTTP server with one typed tool,
// e2b_get_sandbox, that makes the same E2B GET as the gateway and returns its
// JSON as structured content. It runs at the default GC settings, with no
// authentication, policy, audit or logging: what any server written
// directly on the SDK pays per call, and no more.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type getIn struct {
	SandboxID string `json:"sandbox_id" jsonschema:"the sandbox ID"`
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on")
	e2b := flag.String("e2b", "", "E2B API base URL")
	key := flag.String("e2b-key", "", "E2B API key")
	flag.Parse()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512}}
	quiet := slog.New(slog.DiscardHandler)
	s := sdk.NewServer(&sdk.Implementation{Name: "sdkserver", Version: "v0"}, &sdk.ServerOptions{Logger: quiet})
	sdk.AddTool(s, &sdk.Tool{Name: "e2b_get_sandbox", Description: "Get an E2B sandbox."},
		func(ctx context.Context, _ *sdk.CallToolRequest, in getIn) (*sdk.CallToolResult, any, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, *e2b+"/sandboxes/"+url.PathEscape(in.SandboxID), nil)
			if err != nil {
				return nil, nil, err
			}
			req.Header.Set("X-API-Key", *key)
			resp, err := hc.Do(req)
			if err != nil {
				return nil, nil, err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			if err != nil {
				return nil, nil, err
			}
			if resp.StatusCode != http.StatusOK {
				return nil, nil, fmt.Errorf("e2b answered %s", resp.Status)
			}
			var out map[string]any
			if err := json.Unmarshal(b, &out); err != nil {
				return nil, nil, err
			}
			return nil, out, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s },
		&sdk.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true, Logger: quiet})
	srv := &http.Server{Addr: *listen, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
