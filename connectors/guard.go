package connectors

import (
	"context"
	"time"

	"github.com/mcpgate/mcpgate"
)

// What a connector tells the gateway about a call before it runs, so that
// the gateway can enforce approvals and workspace guardrails without knowing
// the upstream. The gateway's rules are generic; reading the upstream's
// state and interpreting the arguments is the connector's job.

// Guard inspects a call with arguments already decoded, reading the upstream
// but changing nothing, and says what the gateway must enforce beyond the
// tool's own policy. An error stops the call (a coded one is shown).
type Guard func(ctx context.Context, credential mcpgate.Secret, args map[string]any) (Assessment, error)

// Resource names the one upstream resource a call changes, so that the
// gateway can serialise the calls that change it (Spec.Changes): a guard's
// check and the call it lets through then see no other change of the
// resource in between, on any replica.
type Resource struct {
	// Kind says what the resource is, in words for people ("sandbox").
	Kind string
	// ID names it among the credential's resources of that kind.
	ID string
}

// Assessment is what a Guard found.
type Assessment struct {
	// Follows names another tool whose policy this call must also meet:
	// the call does what that tool does by another route (a timeout that
	// ends a sandbox early is a kill). Empty: none.
	Follows string
	// Reason says, in words for the user, why Follows applies.
	Reason string
	// Lifetime is how long the call asks a resource to live from now
	// (create, extend, resume); zero when it asks for none.
	Lifetime time.Duration
	// Templates are the names the template that the call starts a
	// resource from goes by (ID, alias); empty when it starts none.
	Templates []string
	// Starts reports that the call adds one to the resources running at
	// once.
	Starts bool
}

// Describer is a connector that can say, in plain words and from the
// upstream's current state (read-only), what a call of one of its tools
// would do, for the person asked to approve it. It returns "" to leave the
// gateway's generic summary.
type Describer interface {
	Describe(ctx context.Context, credential mcpgate.Secret, tool string, args map[string]any) (string, error)
}

// RunningCounter is a connector that can count the team's resources running
// now, for the workspace guardrail on how many may run at once.
type RunningCounter interface {
	Running(ctx context.Context, credential mcpgate.Secret) (int, error)
}
