package connectors

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcpgate/mcpgate"
)

// Caller runs one of the connector's own tools for the dashboard, under the
// workspace's policy and audit, and returns its output.
type Caller func(ctx context.Context, tool string, args map[string]any) (json.RawMessage, error)

// Browser is a connector whose resources the dashboard can list and show.
// It reads them through its own read-only tools (call), so a person sees
// exactly what the AI sees, and builds the dashboard's neutral view of them.
type Browser interface {
	// ResourceNames names what the connector manages ("sandbox",
	// "sandboxes") and the upstream ("E2B").
	ResourceNames() (singular, plural, upstream string)
	ListResources(ctx context.Context, call Caller, page string) (*mcpgate.ResourcePage, error)
	// GetResource returns one resource; now bounds the usage window.
	// Actions are returned all enabled; the caller applies the policy.
	GetResource(ctx context.Context, call Caller, id string, now time.Time) (*mcpgate.ResourceDetail, error)
}
