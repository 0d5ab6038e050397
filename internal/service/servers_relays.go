package service

import (
	"context"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
)

// What a server's requests to the person's client during a call may be
// relayed (#30): sampling and roots only when an admin turned them on for
// the server, elicitation in form mode always, in URL mode only to a host
// the admin allow-listed. The settings are changed by UpdateServer, as
// session_scope is, in the transaction of the server's change, which
// drops the cached policy on every replica at commit.

// relaySettings checks the relay settings of upd, normalizing its host
// list in place, and returns what to store (nil: upd changes none).
func relaySettings(upd *mcpgate.ServerUpdate) (*store.RelaySettings, error) {
	if upd.AllowSampling == nil && upd.AllowRoots == nil && upd.ElicitationURLHosts == nil {
		return nil, nil
	}
	r := &store.RelaySettings{AllowSampling: upd.AllowSampling, AllowRoots: upd.AllowRoots}
	if upd.ElicitationURLHosts != nil {
		hosts, err := mcpgate.NormalizeElicitationHosts(*upd.ElicitationURLHosts)
		if err != nil {
			return nil, err
		}
		upd.ElicitationURLHosts, r.ElicitationURLHosts = &hosts, &hosts
	}
	return r, nil
}

// addRelayArgs puts the relay settings r changes into an audit event's
// arguments (the hosts are names an admin typed, no credential).
func addRelayArgs(args map[string]any, r *store.RelaySettings) {
	if r == nil {
		return
	}
	if r.AllowSampling != nil {
		args["allow_sampling"] = *r.AllowSampling
	}
	if r.AllowRoots != nil {
		args["allow_roots"] = *r.AllowRoots
	}
	if r.ElicitationURLHosts != nil {
		args["elicitation_url_hosts"] = *r.ElicitationURLHosts
	}
}

// serverRelays is what the cached policy holds of a server's relay
// settings, for its calls: relays are the requests the server may have
// relayed to the client (intersected with what the client declared:
// mcpgate.ClientCapabilities.Intersect), elicitationHosts the allow-list
// of URL-mode elicitation (mcpgate.ElicitationHostAllowed).
type serverRelays struct {
	relays           mcpgate.ClientCapabilities
	elicitationHosts []string
}

// relaysOf is the cached view of a stored server's relay settings.
func relaysOf(srv *store.UpstreamServer) serverRelays {
	return serverRelays{
		relays: mcpgate.ClientCapabilities{Sampling: srv.AllowSampling, SamplingTools: srv.AllowSampling, Roots: srv.AllowRoots,
			ElicitationForm: true, ElicitationURL: true},
		elicitationHosts: srv.ElicitationURLHosts,
	}
}

// recordElicitationHost counts a host a server's URL-mode elicitation
// named (allowed or not; host as mcpgate.ElicitationHostAllowed returns
// it, "" is ignored), for the server's page. Best effort: the call goes on
// whatever becomes of it, and a failure is logged, not returned.
func (s *Tools) recordElicitationHost(ctx context.Context, workspaceID, server, host string) {
	if host == "" {
		return
	}
	if err := s.db.RecordElicitationHost(ctx, workspaceID, server, host); err != nil {
		s.log.WarnContext(ctx, "record an elicitation host", "server", server, "host", host, "err", err)
	}
}
