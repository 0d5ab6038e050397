package service

import (
	"context"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
)

// SetBeforeCache installs a hook that runs between a cache load's read and
// its store (tests stage races with invalidations through it).
func (s *Service) SetBeforeCache(fn func()) { s.beforeCache = fn }

// DummyHash is the hash verified for unknown emails.
const DummyHash = dummyHash

// RecordElicitationHost is recordElicitationHost, which the call path uses.
func (s *Tools) RecordElicitationHost(ctx context.Context, workspaceID, server, host string) {
	s.recordElicitationHost(ctx, workspaceID, server, host)
}

// RelaysOf is what the cached policy holds of a stored server's relay
// settings.
func RelaysOf(row *store.UpstreamServer) (mcpgate.ClientCapabilities, []string) {
	r := relaysOf(row)
	return r.relays, r.elicitationHosts
}
