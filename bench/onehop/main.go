// Command onehop is the benchmark's floor: a plain net/http handler with no
// MCP library that decodes a JSON-RPC tools/call body, makes the same E2B
// GET as the gateway, and writes the result as one SSE message event, the
// framing the gateway and go-sdk use. It checks nothing else; what the
// gateway costs beyond it is the price of MCP, authentication, policy and
// audit.
//
// Imports from this module: bench/upstream.
package main

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"time"

	"github.com/mcpgate/mcpgate/bench/upstream"
)

type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  struct {
		Name      string `json:"name"`
		Arguments struct {
			SandboxID string `json:"sandbox_id"`
		} `json:"arguments"`
	} `json:"params"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type result struct {
	Content           []textContent   `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  result          `json:"result"`
}

func main() {
	listen, e2b := upstream.Flags()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in request
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil || in.Method != "tools/call" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		b, err := e2b.GetSandbox(r.Context(), in.Params.Arguments.SandboxID)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out, err := json.Marshal(response{JSONRPC: "2.0", ID: in.ID,
			Result: result{Content: []textContent{{Type: "text", Text: string(b)}}, StructuredContent: b}})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(append(append([]byte("event: message\ndata: "), out...), "\n\n"...))
	})
	srv := &http.Server{Addr: listen, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
