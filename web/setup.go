package web

import (
	"net"
	neturl "net/url"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate"
)

// Client setup snippets, following each client's own documentation field
// for field. They are rendered with keyPlaceholder where the key goes; when a key is
// created, the page's script swaps in the real key (it exists only in the
// API's one-time response, never on the server after that).

// keyPlaceholder stands for the MCP key in snippets until one is created.
const keyPlaceholder = "<YOUR_MCP_KEY>"

// serverName is the label snippets give the gateway in each client.
const serverName = "mcpgate"

// mcpRemote is the mcp-remote bridge at a pinned version (npm registry,
// checked 2026-12-01), so that a snippet runs the release it was written for.
const mcpRemote = "mcp-remote@0.15.1"

type setupClient struct {
	ID    string
	Name  string
	Intro string
	Steps []string
	// Snippets are copyable blocks, in order of preference.
	Snippets []snippet
	Notes    []string
}

type snippet struct {
	Label string
	Text  string
	// Hint, when set, is shown under the snippet: when to use it.
	Hint string
}

func setupClients(publicURL string) []setupClient {
	mcpURL := publicURL + "/mcp"
	connectorURL := mcpgate.ConnectorURL(publicURL, keyPlaceholder)
	bearer := "Bearer " + keyPlaceholder
	bridge := mcpRemoteJSON(mcpURL, bearer)
	local := isLocalURL(publicURL)
	claudeConnector := snippet{Label: "Custom connector URL (the key is inside it: keep it secret)", Text: connectorURL,
		Hint: "Settings → Connectors → Add custom connector: enter a name and this URL, then click Add. It then also works on claude.ai " +
			"and in the mobile apps. Claude connects from Anthropic’s cloud, so only a gateway reachable from the internet works this way."}
	claudeNotes := []string{"If claude_desktop_config.json already has an \"mcpServers\" object, add the \"" + serverName +
		"\" entry inside it. The key sits in \"env\", with no space after Authorization: in \"args\", because Claude Desktop on Windows splits arguments at spaces."}
	if local {
		claudeConnector.Hint = claudeCloudHint(publicURL)
	}
	chatgpt := setupClient{
		ID: "chatgpt", Name: "ChatGPT",
		Intro: "ChatGPT takes a URL only (no key field), so use the connector URL, which carries the key.",
		Steps: []string{
			"Go to chatgpt.com/plugins → + → Add custom MCP server (web only).",
			"Enter a name and paste the connector URL below as the Server URL.",
			"Choose “No authentication” (the key is in the URL), accept the warning, and create it.",
		},
		Snippets: []snippet{{Label: "Connector URL (keep it secret)", Text: connectorURL}},
		Notes:    []string{chatgptNote(publicURL, local)},
	}
	clients := []setupClient{
		{
			ID: "claude", Name: "Claude Desktop & claude.ai",
			Intro: "Two ways in. The config file works with a gateway on your own machine or network (Claude Desktop only; needs Node.js 18 or later). " +
				"A custom connector works in Claude Desktop and on claude.ai, but only when this gateway is reachable from the internet.",
			Steps: claudeConfigSteps("below"),
			Snippets: []snippet{
				{Label: "claude_desktop_config.json (works with a local gateway)", Text: bridge},
				claudeConnector,
			},
			Notes: claudeNotes,
		},
		{
			ID: "claude-code", Name: "Claude Code",
			Intro: "One command; --scope user makes it available in every project.",
			Snippets: []snippet{
				{Label: "Terminal", Text: "claude mcp add --transport http --scope user " + serverName + " " + mcpURL +
					` --header "Authorization: ` + bearer + `"`},
				{Label: "If the header does not arrive", Text: "claude mcp add-json " + serverName + ` '{"type":"http","url":"` + mcpURL +
					`","headers":{"Authorization":"` + bearer + `"}}' --scope user`},
			},
			Notes: []string{"Check the connection with /mcp inside Claude Code, or claude mcp list."},
		},
		{
			ID: "cursor", Name: "Cursor",
			Intro: "Add this to ~/.cursor/mcp.json (all projects) or .cursor/mcp.json (one project).",
			Snippets: []snippet{{Label: "mcp.json", Text: `{"mcpServers":{"` + serverName + `":{"url":"` + mcpURL +
				`","headers":{"Authorization":"` + bearer + `"}}}}`}},
			Notes: []string{"To keep the key out of the file, write \"Bearer ${env:MCP_KEY}\" and set MCP_KEY in your environment. " +
				"Never commit a project .cursor/mcp.json that contains a key."},
		},
		{
			ID: "vscode", Name: "VS Code",
			Intro: "Add this to .vscode/mcp.json (or run “MCP: Open User Configuration” for all workspaces). VS Code asks for the key once and stores it securely.",
			Snippets: []snippet{
				{Label: ".vscode/mcp.json", Text: `{"inputs":[{"type":"promptString","id":"mcp-key","description":"MCP key","password":true}],"servers":{"` +
					serverName + `":{"type":"http","url":"` + mcpURL + `","headers":{"Authorization":"Bearer ${input:mcp-key}"}}}}`},
				{Label: "Paste this when VS Code asks for the MCP key", Text: keyPlaceholder},
			},
		},
		{
			ID: "windsurf", Name: "Windsurf",
			Intro: "Add this to ~/.codeium/windsurf/mcp_config.json, then press refresh in the MCP panel.",
			Snippets: []snippet{{Label: "mcp_config.json", Text: `{"mcpServers":{"` + serverName + `":{"serverUrl":"` + mcpURL +
				`","headers":{"Authorization":"` + bearer + `"}}}}`}},
			Notes: []string{"Windows: %USERPROFILE%\\.codeium\\windsurf\\mcp_config.json. You can write \"Bearer ${env:MCP_KEY}\" to read the key from the environment."},
		},
		{
			ID: "cline", Name: "Cline",
			Intro: "Open MCP Servers → Configure (the file is ~/.cline/data/settings/cline_mcp_settings.json) and add:",
			Snippets: []snippet{{Label: "cline_mcp_settings.json", Text: `{"mcpServers":{"` + serverName + `":{"type":"streamableHttp","url":"` + mcpURL +
				`","headers":{"Authorization":"` + bearer + `"},"disabled":false}}}`}},
			Notes: []string{"Keep \"type\": \"streamableHttp\": without it Cline treats the URL as legacy SSE."},
		},
		{
			ID: "jetbrains", Name: "JetBrains AI Assistant",
			Intro: "Open Settings | Tools | AI Assistant | Model Context Protocol (MCP) → Add, and paste:",
			Snippets: []snippet{
				{Label: "AI Assistant 2026.1 and later", Text: `{"mcpServers":{"` + serverName + `":{"type":"http","url":"` + mcpURL +
					`","headers":{"Authorization":"` + bearer + `"}}}}`},
				{Label: "Older versions and Junie (stdio only: uses the mcp-remote bridge, needs Node.js)", Text: bridge},
			},
		},
		chatgpt,
		{
			ID: "gemini", Name: "Gemini CLI",
			Snippets: []snippet{{Label: "Terminal", Text: "gemini mcp add --transport http -s user --header \"Authorization: " + bearer + "\" " +
				serverName + " " + mcpURL}},
		},
		{
			ID: "codex", Name: "Codex CLI",
			Intro: "Codex reads the key from an environment variable.",
			Snippets: []snippet{
				{Label: "Terminal", Text: "export MCP_KEY=" + keyPlaceholder + "\ncodex mcp add " + serverName + " --url " + mcpURL +
					" --bearer-token-env-var MCP_KEY"},
				{Label: "Or in ~/.codex/config.toml", Text: "[mcp_servers." + serverName + "]\nurl = \"" + mcpURL + "\"\nbearer_token_env_var = \"MCP_KEY\""},
			},
		},
		{
			ID: "zed", Name: "Zed",
			Intro: "Add this to ~/.config/zed/settings.json:",
			Snippets: []snippet{{Label: "settings.json", Text: `{"context_servers":{"` + serverName + `":{"url":"` + mcpURL +
				`","headers":{"Authorization":"` + bearer + `"}}}}`}},
		},
		{
			ID: "generic", Name: "Other clients",
			Intro: "Any MCP client that speaks Streamable HTTP:",
			Snippets: []snippet{
				{Label: "Server URL", Text: mcpURL},
				{Label: "Header", Text: "Authorization: " + bearer},
				{Label: "URL-only clients (no header field): connector URL, keep it secret", Text: connectorURL},
			},
			Notes: []string{"X-API-Key: <key> works in place of the Authorization header."},
		},
	}
	if local {
		// ChatGPT connects only from OpenAI's servers: for a gateway they
		// cannot reach, the clients that work here come first.
		clients = moveBefore(clients, "chatgpt", "generic")
	}
	return clients
}

// moveBefore moves the client id to just before the client before.
func moveBefore(clients []setupClient, id, before string) []setupClient {
	i := slices.IndexFunc(clients, func(c setupClient) bool { return c.ID == id })
	if i < 0 {
		return clients
	}
	c := clients[i]
	clients = slices.Delete(clients, i, i+1)
	j := slices.IndexFunc(clients, func(c setupClient) bool { return c.ID == before })
	if j < 0 {
		j = len(clients)
	}
	return slices.Insert(clients, j, c)
}

// claudeConfigSteps are the steps of Claude Desktop's config file, for a
// snippet where says where it is ("below" the steps, or "above" a hint).
func claudeConfigSteps(where string) []string {
	return []string{
		"In Claude Desktop, open Settings → Developer → Edit Config. The file is ~/Library/Application Support/Claude/claude_desktop_config.json on macOS, " +
			"%APPDATA%\\Claude\\claude_desktop_config.json on Windows.",
		"Paste the JSON " + where + ", save, and restart Claude Desktop: it starts the mcp-remote bridge with npx, which forwards to this gateway with your key.",
	}
}

// claudeCloudHint is the note on Claude's connector boxes (a URL with the
// key, or the server URL for OAuth) for a gateway Anthropic's cloud cannot
// reach.
func claudeCloudHint(publicURL string) string {
	return "Not for this gateway: " + publicURL + " is reachable only from this machine or network, and custom connectors " +
		"connect from Anthropic’s cloud. Use the config file above."
}

// examplePrompts are what to ask once connected.
var examplePrompts = []string{
	"List all my active sandboxes.",
	"Check for idle sandboxes and pause them.",
	"Which sandboxes end in the next 10 minutes? Extend the ones tagged app=prod by an hour.",
	"Show me the last 50 log lines of sandbox <id> and explain any errors.",
	"How much CPU and memory is sandbox <id> using?",
	"Start a sandbox from the base template with metadata user=me, then tell me its ID.",
}

// mcpRemoteJSON is the claude_desktop_config.json entry that runs the pinned
// mcp-remote bridge against url with the Authorization header (Claude
// Desktop's JSON configuration file). The header value is in
// env because some clients split args at spaces. mcp-remote refuses plain
// http except on loopback, so a plain-http gateway elsewhere gets
// --allow-http.
func mcpRemoteJSON(url, bearer string) string {
	args := `"-y","` + mcpRemote + `","` + url + `","--header","Authorization:${AUTH_HEADER}"`
	if strings.HasPrefix(url, "http://") && !isLoopbackURL(url) {
		args += `,"--allow-http"`
	}
	return `{"mcpServers":{"` + serverName + `":{"command":"npx","args":[` + args + `],"env":{"AUTH_HEADER":"` + bearer + `"}}}}`
}

// isLoopbackURL reports whether u points at this machine.
func isLoopbackURL(u string) bool {
	p, err := neturl.Parse(u)
	if err != nil {
		return false
	}
	host := p.Hostname()
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// isLocalURL reports whether u cannot be reached from the internet: a
// loopback, private or link-local address, or a single-label host name.
func isLocalURL(u string) bool {
	if isLoopbackURL(u) {
		return true
	}
	p, err := neturl.Parse(u)
	if err != nil {
		return false
	}
	host := p.Hostname()
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsUnspecified()
	}
	return !strings.Contains(host, ".") || strings.HasSuffix(host, ".local") || strings.HasSuffix(host, ".internal")
}

func chatgptNote(publicURL string, local bool) string {
	if local {
		return "Not for this gateway: ChatGPT connects from OpenAI’s servers, and " + publicURL +
			" is reachable only from this machine or network. Publish the gateway (PUBLIC_URL) first."
	}
	return "ChatGPT connects from OpenAI’s servers, so this gateway’s URL must be reachable from the internet."
}
