package e2b

import (
	"github.com/mcpgate/mcpgate/connectors"
)

// Tool names are a public contract: clients, workspace policies and audit
// rows name them, so a name is never changed or reused.
const (
	ToolListDefaultTemplates = "e2b_list_default_templates"
	ToolListTemplates        = "e2b_list_templates"
	ToolListTemplateBuilds   = "e2b_list_template_builds"
	ToolCreateSandbox        = "e2b_create_sandbox"
	ToolListSandboxes        = "e2b_list_sandboxes"
	ToolGetSandbox           = "e2b_get_sandbox"
	ToolGetSandboxLogs       = "e2b_get_sandbox_logs"
	ToolGetSandboxMetrics    = "e2b_get_sandbox_metrics"
	ToolSetSandboxTimeout    = "e2b_set_sandbox_timeout"
	ToolPauseSandbox         = "e2b_pause_sandbox"
	ToolResumeSandbox        = "e2b_resume_sandbox"
	ToolListSnapshots        = "e2b_list_snapshots"
	ToolFindIdleSandboxes    = "e2b_find_idle_sandboxes"
	ToolKillSandbox          = "e2b_kill_sandbox"
)

// Annotations. OpenWorld is false where a tool acts only on the team's own,
// enumerable E2B resources; it is true for logs, whose text is written by
// whatever runs inside the sandbox and must be read as untrusted input.
var (
	readOnly      = connectors.Annotations{ReadOnly: true, Idempotent: true}
	readOnlyWorld = connectors.Annotations{ReadOnly: true, Idempotent: true, OpenWorld: true}
)

// askFirst ends the description of every tool that changes something.
const askFirst = " Before calling it, tell the user what will happen and ask them to confirm."

// buildTools returns the fourteen tools in the order tools/list shows them
// (TestTools_golden pins it): templates first, then a sandbox's life from
// creation to kill.
func (c *Connector) buildTools() []*connectors.Tool {
	return []*connectors.Tool{
		c.listDefaultTemplatesTool(),
		c.listTemplatesTool(),
		c.listTemplateBuildsTool(),
		c.createSandboxTool(),
		c.listSandboxesTool(),
		c.getSandboxTool(),
		c.getSandboxLogsTool(),
		c.getSandboxMetricsTool(),
		c.setSandboxTimeoutTool(),
		c.pauseSandboxTool(),
		c.resumeSandboxTool(),
		c.listSnapshotsTool(),
		c.findIdleSandboxesTool(),
		c.killSandboxTool(),
	}
}
