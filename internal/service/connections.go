package service

import (
	"context"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

func (s *Service) connector(name string) (connectors.Connector, error) {
	c, ok := s.opts.Registry.Connector(name)
	if !ok {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "no connector named %q", name)
	}
	return c, nil
}

// Connection implements mcpgate.ConnectionService.
func (s *Connections) Connection(ctx context.Context, a *mcpgate.Actor, connector string) (*mcpgate.Connection, error) {
	if _, err := s.connector(connector); err != nil {
		return nil, err
	}
	return s.db.FindConnection(ctx, a.WorkspaceID, connector)
}

// PutConnection implements mcpgate.ConnectionService: the credential is
// checked with its connector (shape, then the upstream itself), and only if
// it is accepted sealed and stored. Nothing is stored on any failure.
func (s *Connections) PutConnection(ctx context.Context, a *mcpgate.Actor, connector string, credential mcpgate.Secret) (*mcpgate.Connection, error) {
	if err := s.requireAdminChange(ctx, a); err != nil {
		return nil, err
	}
	c, err := s.connector(connector)
	if err != nil {
		return nil, err
	}
	_, findErr := s.db.FindConnection(ctx, a.WorkspaceID, connector)
	replacing := mcpgate.ErrorCode(findErr) != mcpgate.ENotFound
	if err := c.CheckCredential(ctx, credential); err != nil {
		ev := mcpgate.NewAdminEvent(a, mcpgate.ActionCredentialRejected, map[string]any{"connector": connector})
		ev.Outcome, ev.Message, ev.UpstreamStatus = mcpgate.OutcomeError, mcpgate.ErrorMessage(err), connectors.UpstreamStatus(err)
		s.record(ctx, ev)
		return nil, err
	}
	conn := &mcpgate.Connection{WorkspaceID: a.WorkspaceID, Connector: connector, KeyHint: c.CredentialHint(credential),
		VerifiedAt: s.now().UTC(), UpdatedBy: a.UserID}
	if err := s.db.PutConnection(ctx, s.opts.Keyring, conn, credential); err != nil {
		return nil, err
	}
	// This replica drops its copy at once; the others on the notification.
	s.creds.Invalidate(a.WorkspaceID)
	action := mcpgate.ActionCredentialStored
	if replacing {
		action = mcpgate.ActionCredentialReplaced
	}
	s.record(ctx, mcpgate.NewAdminEvent(a, action, map[string]any{"connector": connector, "key_hint": conn.KeyHint}))
	return s.db.FindConnection(ctx, a.WorkspaceID, connector)
}

// DeleteConnection implements mcpgate.ConnectionService.
func (s *Connections) DeleteConnection(ctx context.Context, a *mcpgate.Actor, connector string) error {
	if err := s.requireAdminChange(ctx, a); err != nil {
		return err
	}
	if _, err := s.connector(connector); err != nil {
		return err
	}
	if err := s.db.DeleteConnection(ctx, a.WorkspaceID, connector); err != nil {
		return err
	}
	s.creds.Invalidate(a.WorkspaceID)
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionCredentialRemoved, map[string]any{"connector": connector}))
	return nil
}
