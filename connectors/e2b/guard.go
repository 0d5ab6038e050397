package e2b

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// What the gateway must know about a call before it runs, in E2B's terms
// (connectors.Guard). The gateway's rules stay generic: it learns how long
// a call asks a sandbox to live, from which template it starts one, whether
// one more will run, and whether the call ends a sandbox earlier than it
// would otherwise end, which is a kill by another route and so follows
// e2b_kill_sandbox's policy.
//
// A guard reads the sandbox and then the call runs: whatever the guard read
// may have changed by then. Two things keep a decision from being
// overtaken. First, each decision rests on what the call itself asks
// wherever it can, and on the one thing about a sandbox that never changes,
// whether it is paused or killed at its timeout (fixed at create). Second,
// every call that changes one sandbox names it (Spec.Changes, sandboxChanged),
// and the gateway runs the guard and the call of those one at a time per
// workspace and sandbox, on every replica (a database lock): between this
// guard's read and its call no other gateway call changes the sandbox. The
// lock cannot see changes made outside the gateway (an E2B SDK, E2B's
// dashboard, another workspace holding the same team key): a pause made
// there is allowed for below, an extension made there between a timeout's
// read and its call is not (SECURITY.md, "No race ends a sandbox"). The
// clock only moves a new end (now + timeout) later.
//
// Every tool was reviewed for routes to an earlier end:
//   - e2b_kill_sandbox ends a sandbox; it is the policy the others follow.
//     It takes the sandbox's lock too, so that no guard reads a sandbox a
//     kill is about to end.
//   - e2b_set_sandbox_timeout replaces the end time. On a running sandbox
//     killed at its timeout, a new end earlier than the current one ends it
//     early. On a sandbox that is not running E2B refuses the call, but had
//     it run by the time the call lands (a resume racing it from outside),
//     the call would replace the end its resume asked for with one that may
//     be sooner; so it counts as what it would do once running: an earlier
//     end, following kill. The time that passes between the read and the
//     call only moves the new end (now + timeout) later.
//   - e2b_resume_sandbox on a paused sandbox killed at its timeout gives it
//     a fresh end; under a minute (the shortest timeout
//     e2b_set_sandbox_timeout accepts) that is a kill, not a working
//     session. On a running sandbox it never shortens the life (E2B only
//     extends on connect), but one paused just before the call lands (from
//     outside the gateway) is resumed with that short life. So a timeout
//     under a minute follows kill whatever the state; only an auto-paused
//     sandbox, which is paused rather than killed at its end, is exempt.
//   - e2b_pause_sandbox keeps the sandbox (paused, resumable); memory=false
//     loses its processes, which its destructive annotation and its own
//     approval setting cover, but not the sandbox. It takes the lock, so
//     that a resume's or a timeout's guard never reads a sandbox a pause is
//     changing.
//   - e2b_create_sandbox ends nothing and changes no existing sandbox (no
//     lock of its own); it starts one more, which the workspace's limit on
//     running sandboxes counts under a lock of its own (the gateway's).
//   - the read-only tools change nothing and take no lock.

// minWorkingLife is the shortest life a call may give a sandbox that is
// killed at its timeout without counting as ending it.
const minWorkingLife = 60 * time.Second

// autoPaused reports whether a sandbox is paused rather than killed at its
// timeout, which is fixed when it is created. Without a lifecycle (older
// API answers) it is taken to be killed: the guard errs on the side of the
// stricter policy.
func autoPaused(d SandboxDetail) bool {
	return d.Lifecycle != nil && d.Lifecycle.OnTimeout == "pause"
}

// sandboxChanged is the Spec.Changes of the tools that change one sandbox.
func sandboxChanged(args map[string]any) connectors.Resource {
	return connectors.Resource{Kind: "sandbox", ID: stringArg(args, "sandbox_id")}
}

func intArg(args map[string]any, name string) int {
	switch v := args[name].(type) {
	case int64:
		return int(v)
	case float64:
		return int(v)
	case int:
		return v
	}
	return 0
}

func stringArg(args map[string]any, name string) string {
	s, _ := args[name].(string)
	return s
}

// guardCreate: a create asks for timeout seconds of a new running sandbox
// of template_id (without its :tag, which names a build of the same
// template).
func (c *Connector) guardCreate(_ context.Context, _ mcpgate.Secret, args map[string]any) (connectors.Assessment, error) {
	ref, _, _ := strings.Cut(stringArg(args, "template_id"), ":")
	return connectors.Assessment{Lifetime: time.Duration(intArg(args, "timeout")) * time.Second,
		Templates: []string{ref}, Starts: true}, nil
}

// guardSetTimeout: on a sandbox killed at its timeout, a new end earlier
// than the current one ends it early, and a timeout on one that is not
// running counts as such (see above).
func (c *Connector) guardSetTimeout(ctx context.Context, key mcpgate.Secret, args map[string]any) (connectors.Assessment, error) {
	id, timeout, d, err := c.lifetimeChange(ctx, key, args)
	as := connectors.Assessment{Lifetime: timeout}
	if err != nil || autoPaused(d) {
		// An auto-paused sandbox is paused at its end, not killed.
		return as, err
	}
	if d.State != "running" {
		as.Follows = ToolKillSandbox
		as.Reason = fmt.Sprintf("Sandbox %s is %s and not auto-paused: it has no timeout to change now (resume it with "+
			"%s, which takes one), and if it ran again before this call landed, a timeout of %d s would replace the end "+
			"its resume asked for and could make E2B kill it sooner, losing its state.", id, d.State, ToolResumeSandbox,
			int(timeout/time.Second))
		return as, nil
	}
	now := c.client.now()
	if newEnd := now.Add(timeout); newEnd.Before(d.EndAt) {
		as.Follows = ToolKillSandbox
		as.Reason = fmt.Sprintf("Sandbox %s is not auto-paused, so a timeout of %d s makes E2B kill it %s from now "+
			"instead of %s from now, losing its state.", id, int(timeout/time.Second), roughly(timeout), roughly(d.EndAt.Sub(now)))
	}
	return as, nil
}

// guardResume: resuming a sandbox that is not running starts one more
// running sandbox of its template; a timeout under a minute on a sandbox
// killed at its timeout is a kill, whatever its state now (see above).
func (c *Connector) guardResume(ctx context.Context, key mcpgate.Secret, args map[string]any) (connectors.Assessment, error) {
	id, timeout, d, err := c.lifetimeChange(ctx, key, args)
	as := connectors.Assessment{Lifetime: timeout}
	if err != nil {
		return as, err
	}
	// One more running. The template allow-list is not applied: it governs
	// what is created, and this sandbox already was (E2B may not even
	// report a paused sandbox's alias).
	as.Starts = d.State != "running"
	if autoPaused(d) || timeout >= minWorkingLife {
		return as, nil
	}
	as.Follows = ToolKillSandbox
	if d.State == "running" {
		as.Reason = fmt.Sprintf("Sandbox %s is not auto-paused, so a resume with a timeout of %d s makes E2B kill it %s "+
			"from now, losing its state, if it is paused by the time E2B acts on the call; a resume under a minute counts "+
			"as a kill whatever the sandbox's state.", id, int(timeout/time.Second), roughly(timeout))
		return as, nil
	}
	as.Reason = fmt.Sprintf("Sandbox %s is %s and not auto-paused, so resuming it with a timeout of %d s makes "+
		"E2B kill it %s from now, losing its state.", id, d.State, int(timeout/time.Second), roughly(timeout))
	return as, nil
}

// lifetimeChange reads what the guards of a timeout change weigh: the
// sandbox, the timeout asked for, and the sandbox as E2B reports it now.
func (c *Connector) lifetimeChange(ctx context.Context, key mcpgate.Secret, args map[string]any) (id string, timeout time.Duration, d SandboxDetail, err error) {
	id = stringArg(args, "sandbox_id")
	timeout = time.Duration(intArg(args, "timeout")) * time.Second
	d, err = c.client.GetSandbox(ctx, key, id)
	return id, timeout, d, err
}

// Running implements connectors.RunningCounter: E2B's count of the team's
// running sandboxes (X-Total-Running on a one-item list).
func (c *Connector) Running(ctx context.Context, key mcpgate.Secret) (int, error) {
	page, err := c.client.ListSandboxes(ctx, key, ListSandboxesParams{States: []string{"running"}, Limit: 1})
	if err != nil {
		return 0, err
	}
	if page.TotalRunning == nil {
		return len(page.Items), mcpgate.Errorf(mcpgate.EUpstream, "E2B did not say how many sandboxes are running")
	}
	return *page.TotalRunning, nil
}

// roughly renders a duration for people: "45 s", "12 min", "3 h 5 min".
func roughly(d time.Duration) string {
	switch {
	case d < 0:
		return "0 s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%d s", int(d.Round(time.Second)/time.Second))
	case d < 2*time.Hour:
		return fmt.Sprintf("%d min", int(d.Round(time.Minute)/time.Minute))
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%d h %d min", int(d/time.Hour), int(d%time.Hour/time.Minute))
}
