package e2b

import "github.com/mcpgate/mcpgate/connectors"

var (
	_ connectors.Instructor = (*Connector)(nil)
	_ connectors.Prompter   = (*Connector)(nil)
)

// Title implements connectors.Instructor.
func (c *Connector) Title() string { return "E2B sandboxes" }

// Instructions implements connectors.Instructor.
func (c *Connector) Instructions() string {
	return `This server manages the E2B cloud sandboxes of one team, through mcpgate.
Read-only tools (list, get, logs, metrics, templates, find idle) are safe to call.
Creating, resuming and extending sandboxes costs money, and killing one is irreversible:
describe what you are about to do and ask the user before calling those.`
}

// Prompts implements connectors.Prompter: the two common journeys.
func (c *Connector) Prompts() []connectors.Prompt {
	return []connectors.Prompt{
		{Name: "audit_running_sandboxes", Title: "Audit running sandboxes",
			Description: "List every running and paused sandbox with its template, age, end time and metadata, and point out anything unusual.",
			Text: "Audit my E2B sandboxes: list all running and paused sandboxes (every page), and for each give " +
				"its template, when it started, when it will end, and its metadata. Then point out sandboxes that have run " +
				"unusually long, share the same metadata, or end soon. Do not change anything.",
			Requires: []string{ToolListSandboxes}},
		{Name: "clean_up_idle_sandboxes", Title: "Clean up idle sandboxes",
			Description: "Find sandboxes whose CPU stayed low and offer to pause them.",
			Text: "Find my idle E2B sandboxes (CPU under 5% over the last 10 minutes). Show them in a table with " +
				"the figures used. Then ask me which ones to pause, and pause only those I name. Never kill a sandbox " +
				"unless I explicitly ask for it.",
			Requires: []string{ToolFindIdleSandboxes, ToolPauseSandbox}},
	}
}
