package service

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// storeDiscovery stores what a discovery of cur found, through the one
// path of trust (mergeCatalog: new tools off, a trusted tool that changed
// quarantined), whoever asked: an admin, the monitor's probe or its
// re-discovery. A discovery that found what is stored, of a server that is
// up, writes nothing and drops no replica's tool sets; one that changed
// something writes once and invalidates once. It reports whether it wrote.
func (s *Servers) storeDiscovery(ctx context.Context, workspaceID string, cur *store.UpstreamServer, cat *upstream.Catalog,
	actorID string) (mergeReport, bool, error) {
	now := s.now().UTC()
	var rep mergeReport
	wrote := false
	err := s.db.ChangeServer(ctx, s.keyring, workspaceID, cur.Name, func(st *store.ServerState) (*store.ServerWrite, error) {
		if st.Server == nil || st.Server.ID != cur.ID {
			return nil, mcpgate.Errorf(mcpgate.ENotFound, "no upstream server of that name in this workspace")
		}
		if st.Server.URL != cur.URL || !slices.Equal(st.Server.Headers, cur.Headers) {
			return nil, errChangedMeanwhile
		}
		tools, r, err := mergeCatalog(st.Tools, cat.Tools)
		if err != nil {
			return nil, err
		}
		s.assignNames(cur.Name, tools, st.Taken, aliasesOf(st.Tools))
		if st.Server.Health == mcpgate.HealthOK && sameDiscovered(st, cat, tools) {
			return nil, nil
		}
		rep, wrote = r, true
		srv := *st.Server
		setDiscovered(&srv, cat, now)
		return &store.ServerWrite{Server: srv, KeepHeaders: true, Tools: tools, ActorID: actorID, NextCheckAt: s.nextRediscovery(now)}, nil
	})
	if err != nil {
		return mergeReport{}, false, err
	}
	if wrote {
		s.changed(workspaceID)
	}
	return rep, wrote, nil
}

// nextRediscovery is when a server discovered at now is discovered again:
// RediscoverEvery later, plus a jitter that spreads the replicas' checks.
func (s *Servers) nextRediscovery(now time.Time) *time.Time {
	next := now.Add(s.checks.Up)
	if s.checks.Jitter > 0 {
		next = next.Add(rand.N(s.checks.Jitter))
	}
	return &next
}

// sameDiscovered reports whether a discovery found what is stored: the
// server's description and lists, and each tool as it would be stored.
// JSON is compared by value, since the database keeps it normalized.
func sameDiscovered(st *store.ServerState, cat *upstream.Catalog, tools []store.UpstreamTool) bool {
	srv := st.Server
	if srv.ProtocolVersion != cat.ProtocolVersion || !jsonEqual(srv.Init, cat.Init) ||
		!jsonEqual(srv.Prompts, rawList(cat.Prompts)) || !jsonEqual(srv.Resources, rawList(cat.Resources)) ||
		!jsonEqual(srv.ResourceTemplates, rawList(cat.ResourceTemplates)) || len(tools) != len(st.Tools) {
		return false
	}
	stored := make(map[string]store.UpstreamTool, len(st.Tools))
	for _, t := range st.Tools {
		stored[t.Name] = t
	}
	for _, t := range tools {
		old, ok := stored[t.Name]
		if !ok || !sameTool(old, t) {
			return false
		}
	}
	return true
}

func sameTool(a, b store.UpstreamTool) bool {
	if !jsonEqual(a.Definition, b.Definition) || !jsonEqual(a.Pending, b.Pending) {
		return false
	}
	a.Definition, a.Pending, b.Definition, b.Pending = nil, nil, nil, nil
	return reflect.DeepEqual(a, b) // the hints are pointers: compared by value
}

// jsonEqual compares two JSON texts by value (none equals none).
func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// gatewayActor is who the monitor's checks are audited as: the gateway
// itself, in the server's workspace, on no one's request.
func gatewayActor(workspaceID string) *mcpgate.Actor {
	return &mcpgate.Actor{WorkspaceID: workspaceID, Source: mcpgate.SourceGateway}
}

// check probes (while down) or re-discovers (while up) one server a
// replica claimed, with its own workspace's credential: a server that
// answers is up, its catalog stored as any discovery's; one that does not
// stays or goes down. It reports whether the server answered.
func (s *Servers) check(ctx context.Context, c store.ServerCheck) bool {
	cur, err := s.db.FindServer(ctx, c.WorkspaceID, c.Name)
	if err != nil || cur.ID != c.ServerID || !cur.Enabled {
		return false // removed, replaced or turned off since the claim
	}
	headers, err := s.db.OpenServerHeaders(ctx, s.keyring, c.WorkspaceID, c.Name)
	if err != nil {
		s.log.WarnContext(ctx, "server check: open credential", "server", c.Name, "workspace_id", c.WorkspaceID, "err", err)
		return false
	}
	leave, err := s.gate.enter(c.WorkspaceID)
	if err != nil {
		return false // the admins' discoveries come first; the next check is due anyway
	}
	a := gatewayActor(c.WorkspaceID)
	// An OAuth server is checked with the workspace's grant, as calls use
	// it (refreshed if need be).
	var cat *upstream.Catalog
	err = s.creds.Do(ctx, a, c.Name, upstream.Target{URL: cur.URL, Headers: headers}, func(t upstream.Target) error {
		var err error
		cat, err = s.discover(ctx, t)
		return err
	})
	leave()
	var noGrant *CredentialError
	if errors.As(err, &noGrant) {
		// No credential the gateway may use on its own (each member
		// connects their own account, or nobody connected the server's
		// yet): nothing is probed and health stays as calls found it; an
		// admin's Discover, with their own grant, brings such a server up.
		s.log.DebugContext(ctx, "server check skipped: no grant of the workspace's own", "server", c.Name, "workspace_id", c.WorkspaceID)
		return false
	}
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		reason := mcpgate.ErrorMessage(err)
		if s.health.markDown(ctx, c.WorkspaceID, c.Name, reason) {
			s.changed(c.WorkspaceID)
			ev := mcpgate.NewAdminEvent(a, mcpgate.ActionServerDiscoveryFailed, map[string]any{"server": c.Name,
				"url": auditURL(cur.URL), "headers": headerNames(headers)})
			ev.Outcome, ev.Message = mcpgate.OutcomeError, cutText(reason, maxMessage)
			s.record(ctx, ev)
		}
		return false
	}
	rep, wrote, err := s.storeDiscovery(ctx, c.WorkspaceID, cur, cat, "")
	if err != nil {
		s.log.WarnContext(ctx, "server check: store the catalog", "server", c.Name, "workspace_id", c.WorkspaceID, "err", err)
		return true
	}
	s.health.answered(c.WorkspaceID, c.Name)
	if wrote {
		args := map[string]any{"server": c.Name, "tools": len(cat.Tools)}
		if c.Down {
			args["up_again"] = true
			s.log.InfoContext(ctx, "upstream server up again", "server", c.Name, "workspace_id", c.WorkspaceID)
		}
		rep.addTo(args)
		s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerDiscovered, args))
		s.recordQuarantined(ctx, a, c.Name, rep)
	}
	return true
}
