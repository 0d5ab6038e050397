package mcpgate

import (
	"context"
	"encoding/json"
	"fmt"
)

// A server's own endpoint (/mcp/<server>, and /c/<key>/mcp/<server> for
// clients that take only a URL) serves one upstream server of the caller's
// workspace alone, under its own names: its tools as the server gave them,
// under the workspace's policy, and its prompts, resources, resource
// templates, completions and log level relayed to it.

// ServerEndpoint is what a server's own endpoint serves one caller.
type ServerEndpoint struct {
	Server string
	// Init is the server's initialize (or server/discover) result as the
	// last discovery found it: its serverInfo, capabilities and
	// instructions, as given.
	Init json.RawMessage
	// Tools are the server's tools the caller may call now: turned on, not
	// quarantined, still listed, and in the caller's tool set.
	Tools []EndpointTool
	// Hidden are the server's tools the tool service knows that the
	// caller may not call now (turned off, or beyond the key's scope), by
	// their own names, to the names the service knows them by: a call of
	// one goes to the service, which refuses it saying why and audits the
	// refusal, as on /mcp.
	Hidden map[string]string
	// ClientSessions: the server keeps state per session, so each client
	// gets a session of its own (SessionScope ScopeClient).
	ClientSessions bool
	// Prompts, Resources and ResourceTemplates are the server's lists as
	// the last discovery stored them (JSON arrays): a change of them is
	// pushed to the endpoint's open streams as a list change.
	Prompts, Resources, ResourceTemplates json.RawMessage
}

// EndpointTool is one tool of a server's own endpoint: the name the server
// gave it, the name the tool service knows it by, and its definition as
// the server gave it (the pinned one).
type EndpointTool struct {
	Name        string
	ExposedName string
	Approval    Approval
	Definition  json.RawMessage
}

// ServerEndpointService serves the servers' own endpoints. A server the
// workspace does not have, or has turned off, is ENotFound with the same
// words either way, and so is any other workspace's server.
type ServerEndpointService interface {
	// ServerEndpoint returns what the server's endpoint serves the actor.
	ServerEndpoint(ctx context.Context, a *Actor, server string) (*ServerEndpoint, error)
	// RelayToServer sends one request (prompts, resources, templates,
	// completions, the log level) to the server with the workspace's
	// credential and returns the server's result, unchanged. A JSON-RPC
	// error the server answered with is an *UpstreamRPCError.
	RelayToServer(ctx context.Context, a *Actor, server, method string, params json.RawMessage) (json.RawMessage, error)
}

// ResourceSubscriptions is what a ServerEndpointService implements when a
// server's own endpoint may subscribe to the upstream's resources: a
// session with the server, held for one person, on which URIs are
// subscribed and whose notifications/resources/updated reach updated. A
// server that does not declare resources.subscribe is EInvalid.
type ResourceSubscriptions interface {
	OpenResourceSubscriber(ctx context.Context, a *Actor, server string, updated func(uri string)) (ResourceSubscriber, error)
}

// ResourceSubscriber is one such session; Close ends its subscriptions.
// Done is closed when the session ends, by Close or by the server (a
// restart, the session expired there), whose subscriptions then are gone.
type ResourceSubscriber interface {
	Subscribe(ctx context.Context, uri string) error
	Unsubscribe(ctx context.Context, uri string) error
	Close() error
	Done() <-chan struct{}
}

// UpstreamRPCError is a JSON-RPC error an upstream server answered a
// relayed request with: relayed to the caller as the server gave it (with
// the server's credential values replaced, should it echo them).
type UpstreamRPCError struct {
	Code    int64
	Message string
	Data    json.RawMessage
}

// Error implements error.
func (e *UpstreamRPCError) Error() string {
	return fmt.Sprintf("the upstream server answered with JSON-RPC error %d: %s", e.Code, e.Message)
}
