package e2b

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

var _ connectors.Describer = (*Connector)(nil)
var _ connectors.RunningCounter = (*Connector)(nil)

// Describe implements connectors.Describer: for a call on one sandbox, what
// the person approving it needs to recognise the sandbox (template,
// metadata, age, state and end), read from E2B now. Other calls keep the
// gateway's generic summary.
func (c *Connector) Describe(ctx context.Context, key mcpgate.Secret, tool string, args map[string]any) (string, error) {
	id := stringArg(args, "sandbox_id")
	if id == "" {
		return "", nil
	}
	var what string
	switch tool {
	case ToolKillSandbox:
		what = "Kill sandbox %s for good: its processes, memory and files are lost and it cannot be resumed."
	case ToolSetSandboxTimeout:
		what = fmt.Sprintf("Make sandbox %%s end %d s from now (replacing its current end time).", intArg(args, "timeout"))
	case ToolPauseSandbox:
		what = "Pause sandbox %s."
		if v, ok := args["memory"].(bool); ok && !v {
			what = "Pause sandbox %s keeping only its filesystem: its running processes are lost."
		}
	case ToolResumeSandbox:
		what = fmt.Sprintf("Resume or extend sandbox %%s for at least %d s (billed while it runs).", intArg(args, "timeout"))
	default:
		return "", nil
	}
	d, err := c.client.GetSandbox(ctx, key, id)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf(what, id) + " " + sandboxFacts(d, c.client.now), nil
}

// sandboxFacts says which sandbox it is, in one sentence.
func sandboxFacts(d SandboxDetail, now func() time.Time) string {
	var b strings.Builder
	tpl := d.TemplateID
	if d.Alias != "" {
		tpl = d.Alias + " (" + d.TemplateID + ")"
	}
	fmt.Fprintf(&b, "It is %s, from template %s, started %s ago", d.State, tpl, roughly(now().Sub(d.StartedAt)))
	switch {
	case d.State == "paused":
		fmt.Fprintf(&b, ", paused %s ago", roughly(now().Sub(d.EndAt)))
	case autoPaused(d):
		fmt.Fprintf(&b, ", and pauses in %s", roughly(d.EndAt.Sub(now())))
	default:
		fmt.Fprintf(&b, ", and ends in %s", roughly(d.EndAt.Sub(now())))
	}
	if len(d.Metadata) > 0 {
		keys := make([]string, 0, len(d.Metadata))
		for k := range d.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		pairs := make([]string, 0, len(keys))
		for _, k := range keys {
			pairs = append(pairs, k+"="+d.Metadata[k])
		}
		md := strings.Join(pairs, ", ")
		if len(md) > 300 {
			md = md[:300] + "…"
		}
		fmt.Fprintf(&b, "; metadata %s", md)
	}
	b.WriteString(".")
	return b.String()
}
