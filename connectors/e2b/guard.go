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
// Every tool was reviewed for such routes:
//   - e2b_kill_sandbox ends a sandbox; it is the policy the others follow.
//   - e2b_set_sandbox_timeout replaces the end time; moving it earlier on a
//     sandbox that is killed (not auto-paused) at its timeout ends it early.
//   - e2b_resume_sandbox on a paused sandbox that is killed at its timeout
//     gives it a fresh end; under a minute (the shortest timeout
//     e2b_set_sandbox_timeout accepts) that is a kill, not a working
//     session. On a running sandbox it never shortens the life (E2B only
//     extends on connect).
//   - e2b_pause_sandbox keeps the sandbox (paused, resumable); memory=false
//     loses its processes, which its destructive annotation and its own
//     approval setting cover, but not the sandbox.
//   - e2b_create_sandbox ends nothing; the read-only tools change nothing.

// minWorkingLife is the shortest life a call may give a sandbox that is
// killed at its timeout without counting as ending it.
const minWorkingLife = 60 * time.Second

// autoPaused reports whether a sandbox is paused rather than killed at its
// timeout. Without a lifecycle (older API answers) it is taken to be
// killed: the guard errs on the side of the stricter policy.
func autoPaused(d SandboxDetail) bool {
	return d.Lifecycle != nil && d.Lifecycle.OnTimeout == "pause"
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

// guardSetTimeout reads the sandbox's current end: a new end earlier than
// it, on a sandbox that is killed at its timeout, ends it early.
func (c *Connector) guardSetTimeout(ctx context.Context, key mcpgate.Secret, args map[string]any) (connectors.Assessment, error) {
	id, timeout, d, err := c.lifetimeChange(ctx, key, args)
	as := connectors.Assessment{Lifetime: timeout}
	if err != nil {
		return as, err
	}
	if d.State != "running" || autoPaused(d) {
		// A paused sandbox is refused by E2B (409); an auto-paused one is
		// paused at its end, not killed.
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

// guardResume: resuming a paused sandbox starts one more running sandbox
// of its template; a resume that leaves a sandbox killed at its timeout
// less than a minute is a kill (see above).
func (c *Connector) guardResume(ctx context.Context, key mcpgate.Secret, args map[string]any) (connectors.Assessment, error) {
	id, timeout, d, err := c.lifetimeChange(ctx, key, args)
	as := connectors.Assessment{Lifetime: timeout}
	if err != nil {
		return as, err
	}
	if d.State == "paused" {
		// One more running. The template allow-list is not applied: it
		// governs what is created, and this sandbox already was (E2B may
		// not even report a paused sandbox's alias).
		as.Starts = true
		if !autoPaused(d) && timeout < minWorkingLife {
			as.Follows = ToolKillSandbox
			as.Reason = fmt.Sprintf("Sandbox %s is paused and not auto-paused, so resuming it with a timeout of %d s makes "+
				"E2B kill it %s from now, losing its state.", id, int(timeout/time.Second), roughly(timeout))
		}
	}
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
