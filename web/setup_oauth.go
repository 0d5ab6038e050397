package web

import "strings"

// OAuth comes first in the setup of the clients that sign in by themselves
// (guides/mcp-clients.md): claude.ai and Claude Desktop connectors and
// ChatGPT take a URL and then OAuth; Claude Code, Cursor, VS Code and
// Windsurf start OAuth when the server advertises it and no header is
// configured. The key snippets of setup.go stay, after it, as the fallback.

// withOAuthSetup puts the URL-only, sign-in setup first for the clients that
// support it and relabels their key snippets as the alternative.
func withOAuthSetup(clients []setupClient, publicURL string) []setupClient {
	mcpURL := publicURL + "/mcp"
	signIn := "Your browser opens this gateway: sign in, choose the workspace and the access (full or read-only), and click Allow. " +
		"Disconnect it any time under Connected apps below."
	out := make([]setupClient, 0, len(clients))
	for _, c := range clients {
		var first snippet
		switch c.ID {
		case "claude":
			// The key setup's own steps (the config file and its bridge)
			// become a note beside its snippets.
			if len(c.Steps) > 0 {
				c.Notes = append([]string{"With a key instead, for a gateway on your own machine or network (Claude Desktop only): " +
					strings.Join(c.Steps, " ")}, c.Notes...)
			}
			c.Intro = "Add a custom connector and sign in: no key goes into Claude. It works in Claude Desktop, on claude.ai and (once added on the web) in the mobile apps."
			c.Steps = []string{
				"Open Settings → Connectors → Add custom connector.",
				"Enter a name (for example “E2B sandboxes”), paste the server URL below, and click Add, then Connect.",
				signIn,
				"Claude connects from Anthropic’s cloud, so this gateway’s URL must be reachable from the internet.",
			}
			first = snippet{Label: "Server URL (sign in with OAuth)", Text: mcpURL}
		case "chatgpt":
			c.Intro = "ChatGPT takes a URL and signs you in with OAuth: no key goes into ChatGPT."
			c.Steps = []string{
				"Go to chatgpt.com/plugins → + → Add custom MCP server (web only).",
				"Enter a name, paste the server URL below, and choose OAuth as the authentication.",
				signIn,
			}
			c.Notes = append(c.Notes, "Without OAuth: use the connector URL below with “No authentication” (it carries a key, so keep it secret).")
			first = snippet{Label: "Server URL (sign in with OAuth)", Text: mcpURL}
		case "claude-code":
			first = snippet{Label: "Terminal, sign in with OAuth (then run /mcp in Claude Code and choose Authenticate)",
				Text: "claude mcp add --transport http --scope user " + serverName + " " + mcpURL}
		case "cursor":
			first = snippet{Label: "mcp.json, sign in with OAuth (Cursor opens the sign-in when it connects)",
				Text: `{"mcpServers":{"` + serverName + `":{"url":"` + mcpURL + `"}}}`}
		case "vscode":
			first = snippet{Label: ".vscode/mcp.json, sign in with OAuth (VS Code asks to authenticate when it starts the server)",
				Text: `{"servers":{"` + serverName + `":{"type":"http","url":"` + mcpURL + `"}}}`}
		case "windsurf":
			first = snippet{Label: "mcp_config.json, sign in with OAuth (Windsurf opens the sign-in after refresh)",
				Text: `{"mcpServers":{"` + serverName + `":{"serverUrl":"` + mcpURL + `"}}}`}
		default:
			out = append(out, c)
			continue
		}
		snips := []snippet{first}
		for _, s := range c.Snippets {
			s.Label = "Or with an MCP key: " + s.Label
			snips = append(snips, s)
		}
		c.Snippets = snips
		out = append(out, c)
	}
	return out
}
