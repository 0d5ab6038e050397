package web

import "strings"

// OAuth comes first in the setup of the clients that sign in by themselves:
// claude.ai and Claude Desktop connectors and ChatGPT take a URL and then OAuth; Claude Code, Cursor, VS Code and
// Windsurf start OAuth when the server advertises it and no header is
// configured. The key snippets of setup.go stay, after it, as the fallback.

// withOAuthSetup puts the URL-only, sign-in setup first for the clients that
// support it and relabels their key snippets as the alternative.
func withOAuthSetup(clients []setupClient, publicURL string) []setupClient {
	mcpURL := publicURL + "/mcp"
	local := isLocalURL(publicURL)
	signIn := "Your browser opens this gateway: sign in, choose the workspace and the access (full or read-only), and click Allow. " +
		"Disconnect it any time under Connected apps below."
	out := make([]setupClient, 0, len(clients))
	for _, c := range clients {
		var first snippet
		switch c.ID {
		case "claude":
			if local {
				out = append(out, claudeLocalOAuth(c, publicURL))
				continue
			}
			// The key setup's own steps (the config file and its bridge)
			// become the hint under the config file's snippet.
			for i := range c.Snippets {
				if strings.HasPrefix(c.Snippets[i].Label, "claude_desktop_config.json") {
					c.Snippets[i].Hint = "For a gateway on your own machine or network (Claude Desktop only). " + strings.Join(claudeConfigSteps("above"), " ")
				}
			}
			c.Intro = "Add a custom connector and sign in: no key goes into Claude. It works in Claude Desktop, on claude.ai and (once added on the web) in the mobile apps."
			c.Steps = []string{
				"Open Settings → Connectors → Add custom connector.",
				"Enter a name (for example “mcpgate”), paste the server URL below, and click Add, then Connect.",
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
			c.Notes = append(c.Notes, "Without OAuth: use the connector URL above with “No authentication” (it carries a key, so keep it secret).")
			first = snippet{Label: "Server URL (sign in with OAuth)", Text: mcpURL}
			if local {
				// Neither box works from OpenAI's servers: each says so.
				first.Hint = chatgptNote(publicURL, true)
				for i := range c.Snippets {
					c.Snippets[i].Hint = first.Hint
				}
				c.Notes = c.Notes[1:]
			}
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

// claudeLocalOAuth is the Claude tab for a gateway Anthropic's cloud cannot
// reach: the config file, which works here, stays first with its steps;
// the OAuth server URL follows it with the same "not for this gateway" note
// as the connector URL after it.
func claudeLocalOAuth(c setupClient, publicURL string) setupClient {
	c.Intro = "This gateway is reachable only from this machine or network, so use the config file: Claude Desktop runs the mcp-remote bridge " +
		"(needs Node.js 18 or later), which forwards to the gateway with your key. Custom connectors (Claude Desktop and claude.ai) connect from " +
		"Anthropic’s cloud: they work once the gateway is reachable from the internet."
	var config, connector []snippet
	for _, s := range c.Snippets {
		if strings.HasPrefix(s.Text, "{") {
			config = append(config, s)
			continue
		}
		s.Label = "Or with an MCP key: " + s.Label
		connector = append(connector, s)
	}
	oauth := snippet{Label: "Server URL for a custom connector (sign in with OAuth)", Text: publicURL + "/mcp", Hint: claudeCloudHint(publicURL)}
	c.Snippets = append(append(config, oauth), connector...)
	return c
}
