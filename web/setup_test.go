package web

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
)

// The Claude tab offers the config-file route (mcp-remote, works with a local
// gateway) besides the connector URL, and every snippet that runs mcp-remote
// pins its version.
func TestSetupClients_ClaudeDesktopConfig(t *testing.T) {
	tests := []struct {
		publicURL string
		want      string
		local     bool
	}{
		{"https://gw.example.com", `{"mcpServers":{"mcpgate":{"command":"npx","args":["-y","` + mcpRemote +
			`","https://gw.example.com/mcp","--header","Authorization:${AUTH_HEADER}"],"env":{"AUTH_HEADER":"Bearer <YOUR_MCP_KEY>"}}}}`, false},
		{"http://localhost:8080", `{"mcpServers":{"mcpgate":{"command":"npx","args":["-y","` + mcpRemote +
			`","http://localhost:8080/mcp","--header","Authorization:${AUTH_HEADER}"],"env":{"AUTH_HEADER":"Bearer <YOUR_MCP_KEY>"}}}}`, true},
		{"http://192.168.1.20:8080", `{"mcpServers":{"mcpgate":{"command":"npx","args":["-y","` + mcpRemote +
			`","http://192.168.1.20:8080/mcp","--header","Authorization:${AUTH_HEADER}","--allow-http"],"env":{"AUTH_HEADER":"Bearer <YOUR_MCP_KEY>"}}}}`, true},
	}
	for _, tt := range tests {
		var claude *setupClient
		for _, c := range setupClients(tt.publicURL) {
			if c.ID == "claude" {
				claude = &c
			}
			for _, s := range c.Snippets {
				if strings.Contains(s.Text, "mcp-remote") && !regexp.MustCompile(`"mcp-remote@\d+\.\d+\.\d+"`).MatchString(s.Text) {
					t.Errorf("%s snippet runs mcp-remote without a pinned version: %s", c.ID, s.Text)
				}
			}
		}
		if claude == nil || len(claude.Snippets) < 2 {
			t.Fatalf("no Claude tab with two snippets")
		}
		if got := claude.Snippets[0].Text; got != tt.want {
			t.Errorf("%s: Claude config snippet =\n%s\nwant\n%s", tt.publicURL, got, tt.want)
		}
		var v any
		if err := json.Unmarshal([]byte(claude.Snippets[0].Text), &v); err != nil {
			t.Errorf("Claude config snippet is not JSON: %v", err)
		}
		if !strings.Contains(claude.Snippets[1].Text, "/c/<YOUR_MCP_KEY>/mcp") {
			t.Errorf("second Claude snippet = %q, want the connector URL", claude.Snippets[1].Text)
		}
		if got := strings.HasPrefix(claude.Snippets[1].Hint, "Not for this gateway"); got != tt.local {
			t.Errorf("%s: connector hint = %q; want it to say a local gateway cannot use it: %v", tt.publicURL, claude.Snippets[1].Hint, tt.local)
		}
	}
}

func TestIsLocalURL(t *testing.T) {
	for u, want := range map[string]bool{
		"http://localhost:8080": true, "http://127.0.0.1:8080": true, "http://[::1]:8080": true, "http://10.0.0.5": true,
		"http://mybox:8080": true, "https://gw.example.com": false, "https://203.0.113.7": false,
	} {
		if got := isLocalURL(u); got != want {
			t.Errorf("isLocalURL(%q) = %v, want %v", u, got, want)
		}
	}
}

// The setup tabs as the keys page shows them (withOAuthSetup): a gateway on
// localhost leads with what works there, every box that cannot work for it
// says so, and no text points below where nothing follows (notes and hints
// sit under the snippets).
func TestSetupTabs_OrderAndWording(t *testing.T) {
	find := func(cs []setupClient, id string) (int, setupClient) {
		for i, c := range cs {
			if c.ID == id {
				return i, c
			}
		}
		t.Fatalf("no %s tab", id)
		return -1, setupClient{}
	}
	for _, u := range []string{"http://localhost:8080", "https://gw.example.com"} {
		local := isLocalURL(u)
		cs := withOAuthSetup(setupClients(u), u)
		for _, c := range cs {
			for _, s := range c.Snippets {
				if strings.Contains(s.Hint, "below") {
					t.Errorf("%s: %s tab: the hint under %q points below: %s", u, c.ID, s.Label, s.Hint)
				}
			}
			for _, n := range c.Notes {
				if strings.Contains(n, "below") {
					t.Errorf("%s: %s tab: a note under the snippets points below: %s", u, c.ID, n)
				}
			}
		}
		_, claude := find(cs, "claude")
		first := claude.Snippets[0]
		var oauth snippet
		for _, s := range claude.Snippets {
			if s.Text == u+"/mcp" {
				oauth = s
			}
		}
		if oauth.Text == "" {
			t.Fatalf("%s: the Claude tab has no OAuth server URL", u)
		}
		if got := strings.HasPrefix(oauth.Hint, "Not for this gateway"); got != local {
			t.Errorf("%s: the OAuth server URL's hint = %q; want the \"not for this gateway\" note: %v", u, oauth.Hint, local)
		}
		steps := strings.Join(claude.Steps, " ")
		if local {
			if !strings.Contains(first.Text, `"`+mcpRemote+`"`) || !strings.Contains(steps, "Paste the JSON below") {
				t.Errorf("%s: the Claude tab starts with %q after steps %q, want the config file (which works locally) under its steps", u, first.Label, steps)
			}
			ci, _ := find(cs, "chatgpt")
			zi, _ := find(cs, "zed")
			if ci < zi {
				t.Errorf("%s: ChatGPT (which cannot reach a local gateway) is tab %d, before Zed (%d)", u, ci, zi)
			}
			_, chatgpt := find(cs, "chatgpt")
			for _, s := range chatgpt.Snippets {
				if !strings.HasPrefix(s.Hint, "Not for this gateway") {
					t.Errorf("%s: ChatGPT's %q box lacks the \"not for this gateway\" note: %q", u, s.Label, s.Hint)
				}
			}
			continue
		}
		if first != oauth || strings.Contains(steps, "JSON") {
			t.Errorf("%s: the Claude tab starts with %q after steps %q, want the OAuth connector", u, first.Label, steps)
		}
		for _, s := range claude.Snippets {
			if strings.HasPrefix(s.Text, "{") && !strings.Contains(s.Hint, "Paste the JSON above") {
				t.Errorf("%s: the config file's hint = %q, want its steps, pointing above", u, s.Hint)
			}
		}
	}
}

// Once E2B is connected, its page points at the next step: a key for
// someone without an active one of their own, then a client's setup.
func TestConnections_NextStep(t *testing.T) {
	f := newFake(mcpgate.RoleOwner)
	f.keys = []mcpgate.APIKey{{ID: "k2", UserID: "u2", Name: "someone else's", CreatedAt: testNow}}
	h := mustHandler(t, f)
	_, body := get(t, h, "/app/w/ws1/connections", testUser)
	if !strings.Contains(body, `id="next-step-e2b"`) || !strings.Contains(body, `href="/app/w/ws1/keys#create-key"`) {
		t.Errorf("connected, without a key of one's own: the page does not point at creating one")
	}
	f.keys = append(f.keys, mcpgate.APIKey{ID: "k1", UserID: "u1", Name: "mine", CreatedAt: testNow})
	_, body = get(t, h, "/app/w/ws1/connections", testUser)
	if !strings.Contains(body, `href="/app/w/ws1/keys#setup"`) || strings.Contains(body, "#create-key") {
		t.Errorf("connected, with a key: the page does not point at a client's setup")
	}
	f.conn = nil
	if _, body = get(t, h, "/app/w/ws1/connections", testUser); strings.Contains(body, `id="next-step-e2b"`) {
		t.Errorf("not connected, yet the page points past connecting")
	}
}
