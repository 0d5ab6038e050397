package mcp

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

// limit takes a token from each limit that applies to the actor: per key
// (one client), per person (all of their keys together: twenty keys must
// not mean twenty times the rate) and per workspace (all of its people).
// The first limit that is exhausted answers 429.
func (g *Gateway) limit(w http.ResponseWriter, r *http.Request, body []byte, a *mcpgate.Actor, now time.Time) bool {
	for _, l := range []struct {
		set  *limiterSet
		name string
		msg  string
	}{
		{&g.limiters, a.KeyID, "this key is sending too many requests; slow down"},
		{&g.userLimits, a.UserID, "your keys together are sending too many requests; slow down"},
		{&g.workspaceLimits, a.WorkspaceID, "this workspace is sending too many requests; slow down"},
	} {
		if l.name == "" {
			continue
		}
		if ok, wait := l.set.allow(l.name, now); !ok {
			g.metrics.RateLimited()
			g.writeTooMany(w, r, body, retryAfter(mcpgate.Errorf(mcpgate.ETooMany, "%s", l.msg), wait))
			return false
		}
	}
	return true
}

// rpcRequest is what writeTooMany needs of a JSON-RPC request.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
}

// rpcRateLimited is the JSON-RPC error code of a refusal by a rate limit
// (in the range JSON-RPC leaves to implementations).
const rpcRateLimited = -32029

// writeTooMany answers 429 with Retry-After. When the body is one JSON-RPC
// request with an id, the answer is a JSON-RPC error response to that id,
// so that an MCP client shows the message (and data.retry_after) rather
// than a transport failure; anything else (a notification, a batch, a body
// that is not JSON-RPC) gets the gateway's one error shape.
func (g *Gateway) writeTooMany(w http.ResponseWriter, r *http.Request, body []byte, err *mcpgate.Error) {
	var req rpcRequest
	if json.Unmarshal(body, &req) != nil || req.JSONRPC != "2.0" || len(req.ID) == 0 || string(req.ID) == "null" || req.Method == "" {
		httpx.WriteError(w, r, g.log, err)
		return
	}
	w.Header().Set("Retry-After", strconv.Itoa(err.RetryAfter))
	httpx.WriteJSON(w, http.StatusTooManyRequests, map[string]any{
		"jsonrpc": "2.0", "id": req.ID,
		"error": map[string]any{"code": rpcRateLimited, "message": err.Message,
			"data": map[string]any{"code": mcpgate.ETooMany, "retry_after": err.RetryAfter}},
	})
}
