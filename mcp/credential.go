package mcp

import (
	"context"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// PutCredential checks a credential with its connector (shape, then the
// upstream itself), and only if it is accepted seals and stores it for the
// workspace, replacing any previous one. Nothing is stored on any failure.
// The caller has checked that the user may (owner or admin).
func (g *Gateway) PutCredential(ctx context.Context, workspaceID, userID, connector string, credential mcpgate.Secret) (*mcpgate.Connection, error) {
	c, ok := g.opts.Registry.Connector(connector)
	if !ok {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "no connector named %q", connector)
	}
	_, findErr := g.opts.Backend.FindConnection(ctx, workspaceID, connector)
	replacing := mcpgate.ErrorCode(findErr) != mcpgate.ENotFound
	if err := c.CheckCredential(ctx, credential); err != nil {
		g.record(ctx, mcpgate.AuditEvent{WorkspaceID: workspaceID, ActorID: userID, Kind: "admin", Action: "credential.rejected",
			Arguments: map[string]any{"connector": connector}, Outcome: mcpgate.OutcomeError, Message: mcpgate.ErrorMessage(err),
			UpstreamStatus: connectors.UpstreamStatus(err), Source: "dashboard"})
		return nil, err
	}
	conn := &mcpgate.Connection{WorkspaceID: workspaceID, Connector: connector, KeyHint: c.CredentialHint(credential),
		VerifiedAt: g.now().UTC(), UpdatedBy: userID}
	if err := g.opts.Backend.PutConnection(ctx, conn, credential); err != nil {
		return nil, err
	}
	action := "credential.stored"
	if replacing {
		action = "credential.replaced"
	}
	g.record(ctx, mcpgate.AuditEvent{WorkspaceID: workspaceID, ActorID: userID, Kind: "admin", Action: action,
		Arguments: map[string]any{"connector": connector, "key_hint": conn.KeyHint}, Outcome: mcpgate.OutcomeOK, Source: "dashboard"})
	return g.opts.Backend.FindConnection(ctx, workspaceID, connector)
}

// Connection returns what may be shown of a workspace's stored credential.
func (g *Gateway) Connection(ctx context.Context, workspaceID, connector string) (*mcpgate.Connection, error) {
	if _, ok := g.opts.Registry.Connector(connector); !ok {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "no connector named %q", connector)
	}
	return g.opts.Backend.FindConnection(ctx, workspaceID, connector)
}

// DeleteCredential removes a workspace's stored credential.
func (g *Gateway) DeleteCredential(ctx context.Context, workspaceID, userID, connector string) error {
	if _, ok := g.opts.Registry.Connector(connector); !ok {
		return mcpgate.Errorf(mcpgate.ENotFound, "no connector named %q", connector)
	}
	if err := g.opts.Backend.DeleteConnection(ctx, workspaceID, connector); err != nil {
		return err
	}
	g.record(ctx, mcpgate.AuditEvent{WorkspaceID: workspaceID, ActorID: userID, Kind: "admin", Action: "credential.removed",
		Arguments: map[string]any{"connector": connector}, Outcome: mcpgate.OutcomeOK, Source: "dashboard"})
	return nil
}
