package service

import (
	"context"

	"github.com/mcpgate/mcpgate"
)

// TEMPORARY until h3-settings merges.
func elicitationHostAllowed(srv upstreamServer, raw string) (string, bool) { return parseURLHost(raw), false }

func (s *Tools) recordElicitationHost(ctx context.Context, workspaceID, server, host string) {}

func serverRelays(srv upstreamServer) mcpgate.ClientCapabilities {
	return mcpgate.ClientCapabilities{ElicitationForm: true, ElicitationURL: true}
}
