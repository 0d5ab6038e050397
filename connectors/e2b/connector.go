package e2b

import (
	"context"
	"regexp"
	"strings"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// keyShape is the team API key format the E2B SDKs check.
var keyShape = regexp.MustCompile(`^e2b_[0-9a-f]+$`)

// Connector is the E2B connector: its client, credential check and tools.
type Connector struct {
	client *Client
	tools  []*connectors.Tool
}

var _ connectors.Connector = (*Connector)(nil)

// New returns the E2B connector for opts.
func New(opts Options) *Connector {
	c := &Connector{client: NewClient(opts)}
	c.tools = c.buildTools()
	return c
}

// Client returns the connector's E2B client.
func (c *Connector) Client() *Client { return c.client }

// Name implements connectors.Connector.
func (c *Connector) Name() string { return "e2b" }

// Tools implements connectors.Connector.
func (c *Connector) Tools() []*connectors.Tool { return c.tools }

// CheckCredential implements connectors.Connector: the key must have the
// team API key's shape, and E2B must accept it on a one-item sandbox list.
func (c *Connector) CheckCredential(ctx context.Context, credential mcpgate.Secret) error {
	key := strings.TrimSpace(credential.Reveal())
	switch {
	case strings.HasPrefix(key, "sk_e2b_"):
		return mcpgate.Errorf(mcpgate.EInvalid, "this is an E2B personal access token (sk_e2b_…); mcpgate needs a team API key "+
			"(e2b_…), which you find in the E2B dashboard under your team's API Keys (https://e2b.dev/dashboard?tab=keys)")
	case !keyShape.MatchString(key):
		return mcpgate.Errorf(mcpgate.EInvalid, "this is not an E2B team API key: it must look like e2b_ followed by hex digits; "+
			"copy it from the E2B dashboard's API Keys page (https://e2b.dev/dashboard?tab=keys)")
	}
	_, err := c.client.ListSandboxes(ctx, mcpgate.Secret(key), ListSandboxesParams{Limit: 1})
	switch mcpgate.ErrorCode(err) {
	case "":
		return nil
	case mcpgate.EUnauthorized, mcpgate.EForbidden:
		return mcpgate.WrapError(mcpgate.EInvalid, err, "E2B rejected this key: check that it is a current team API key "+
			"(e2b_…) from the E2B dashboard's API Keys page")
	case mcpgate.ETooMany:
		return err
	default:
		return mcpgate.WrapError(mcpgate.EUnavailable, err, "could not verify the key: E2B is unreachable or failing right now; try again in a minute")
	}
}

// CredentialHint implements connectors.Connector: "e2b_…" and the last four
// characters, which is all a user needs to tell keys apart.
func (c *Connector) CredentialHint(credential mcpgate.Secret) string {
	k := strings.TrimSpace(credential.Reveal())
	if len(k) < 12 {
		return "e2b_…"
	}
	return "e2b_…" + k[len(k)-4:]
}
