package mcp

import (
	"context"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

// addPrompts offers the common journeys as MCP prompts, where the tools they
// use are available to the key.
func addPrompts(s *sdk.Server, wt *workspaceTools, scope mcpgate.Scope) {
	if wt.policy["e2b_list_sandboxes"].Enabled {
		s.AddPrompt(&sdk.Prompt{Name: "audit_running_sandboxes", Title: "Audit running sandboxes",
			Description: "List every running and paused sandbox with its template, age, end time and metadata, and point out anything unusual."},
			func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
				return promptText("Audit my E2B sandboxes: list all running and paused sandboxes (every page), and for each give " +
					"its template, when it started, when it will end, and its metadata. Then point out sandboxes that have run " +
					"unusually long, share the same metadata, or end soon. Do not change anything."), nil
			})
	}
	if wt.policy["e2b_find_idle_sandboxes"].Enabled && scope == mcpgate.ScopeFull && wt.policy["e2b_pause_sandbox"].Enabled {
		s.AddPrompt(&sdk.Prompt{Name: "clean_up_idle_sandboxes", Title: "Clean up idle sandboxes",
			Description: "Find sandboxes whose CPU stayed low and offer to pause them."},
			func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
				return promptText("Find my idle E2B sandboxes (CPU under 5% over the last 10 minutes). Show them in a table with " +
					"the figures used. Then ask me which ones to pause, and pause only those I name. Never kill a sandbox " +
					"unless I explicitly ask for it."), nil
			})
	}
}

func promptText(text string) *sdk.GetPromptResult {
	return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: text}}}}
}
