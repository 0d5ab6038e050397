package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

// unavailableRetry is the Retry-After, in seconds, of an endpoint that
// cannot serve because its database is away.
const unavailableRetry = 5

// writeRPCUnavailable answers a request the endpoint cannot serve right now
// (the database is away and nothing cached stands in) with HTTP 503,
// Retry-After, and a JSON-RPC error for the request's id, so that an MCP
// client reads a protocol message it can show rather than a bare status.
func writeRPCUnavailable(w http.ResponseWriter, r *http.Request, msg string) {
	var id json.RawMessage = []byte("null")
	if r.Body != nil {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var env struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(bytes.TrimSpace(body), &env) == nil && len(env.ID) > 0 {
			id = env.ID
		}
	}
	w.Header().Set("Retry-After", strconv.Itoa(unavailableRetry))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": -32603, "message": msg, "data": map[string]any{"retryAfterSeconds": unavailableRetry}}})
}

// errStopping answers a tool call still running when the gateway stops.
// The call may have taken effect upstream (a sandbox created, a command
// run), so the message says to look before repeating it.
var errStopping = &mcpgate.Error{Code: mcpgate.EUnavailable, RetryAfter: unavailableRetry,
	Message: "the gateway is stopping and ended this call before it finished; it may or may not have taken effect, " +
		"so check (for example, list the sandboxes) before trying it again in a few seconds"}

// stopper ends the tool calls still running when the gateway stops. Its
// zero value is ready.
type stopper struct {
	once     sync.Once
	stopping context.Context // ends BeginStop's grace after it is called
	cancel   context.CancelCauseFunc
	begin    sync.Once
}

func (s *stopper) init() {
	s.once.Do(func() { s.stopping, s.cancel = context.WithCancelCause(context.Background()) })
}

// BeginStop tells the gateway it is stopping: the tool calls that are still
// running after grace are ended and answered with a tool error saying so
// (and audited as such), so that a stop answers every call in flight within
// grace and their own short wind-down, whatever they wait on (a database
// that hangs, an upstream, a human approval). Calls that finish within grace are
// answered as usual.
func (g *Gateway) BeginStop(grace time.Duration) {
	// The notification streams hold no work to finish: they end once the
	// calls in flight are answered, or the HTTP server's shutdown would
	// wait on them (listen.go).
	g.push.stopWhenIdle()
	s := &g.stopper
	s.init()
	s.begin.Do(func() { time.AfterFunc(grace, func() { s.cancel(errStopping) }) })
}

// untilStop returns ctx, also cancelled (with errStopping as its cause)
// once BeginStop's grace is over.
func (g *Gateway) untilStop(ctx context.Context) (context.Context, context.CancelFunc) {
	g.stopper.init()
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(g.stopper.stopping, func() { cancel(errStopping) })
	return ctx, func() { unhook(); cancel(context.Canceled) }
}

// stoppingError is errStopping in place of err when the call's context
// ended because the gateway is stopping, whatever error that gave.
func stoppingError(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errStopping) {
		return errStopping
	}
	return err
}

type serverKey struct{}

// withServer puts the server built for the request in its context, where
// getServer finds it; building it first lets a failure be answered here.
func withServer(ctx context.Context, s *sdk.Server) context.Context {
	return context.WithValue(ctx, serverKey{}, s)
}

func serverFrom(ctx context.Context) *sdk.Server {
	s, _ := ctx.Value(serverKey{}).(*sdk.Server)
	return s
}

// unavailableMessage is what a client is told when its workspace's settings
// cannot be read.
func unavailableMessage(err error) string {
	if mcpgate.ErrorCode(err) == mcpgate.EUnavailable {
		return mcpgate.ErrorMessage(err)
	}
	return "the gateway cannot serve this workspace right now; try again in a few seconds"
}
