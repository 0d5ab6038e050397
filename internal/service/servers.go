package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/upstream"
	"github.com/mcpgate/mcpgate/vault"
)

// UpstreamKey scopes the gateway's sessions with upstream servers: no
// session is shared across workspaces, servers or people, nor, for a
// server of client scope, across the sessions of its endpoint's clients
// (ClientSession, the id the endpoint issued; "" outside one).
type UpstreamKey struct {
	WorkspaceID   string
	Server        string
	UserID        string
	ClientSession string
	// Capabilities are what the sessions declare to the server (the
	// caller's client's, as far as the server is allowed them): sessions
	// that declare different ones are never shared.
	Capabilities upstream.Capabilities
}

// SessionBound implements upstream.SessionBounder: a client session's
// requests share its one upstream session, which keeps the client's
// state, one request at a time; the pool's bound holds otherwise.
func (k UpstreamKey) SessionBound() int {
	if k.ClientSession != "" {
		return 1
	}
	return 0
}

// ServersOptions configure the upstream server service.
type ServersOptions struct {
	DB      *store.DB
	Keyring *vault.Keyring
	Audit   Auditor
	Logger  *slog.Logger
	// Registry names the connectors: no server may take a connector's
	// name, and no exposed name a connector tool's.
	Registry *connectors.Registry
	// Pool connects to the servers; Network is the hop's policy it was
	// built with, used to refuse a URL at input with a clear message.
	Pool    *upstream.Pool[UpstreamKey]
	Network upstream.Network
	// PublicURL is where people reach the gateway (messages name pages).
	PublicURL string
	Now       func() time.Time
	// Credentials is the credential hook (OAuth servers); nil: servers
	// take headers only.
	Credentials *UpstreamCredentials
	// Invalidate, when set, is told of every change of a workspace's
	// servers (kind InvalidatePolicy), so that this replica's tool policy
	// drops it at once; the store notifies every replica as well.
	Invalidate func(kind, workspaceID string)
	// Health is this replica's count of failed calls, shared with the tool
	// service (nil: one of the server service's own); its ProbeEvery is how
	// often a server that is down is probed.
	Health *UpstreamHealth
	// RediscoverEvery is how often a server that is up is discovered again
	// (default 15 min), plus up to RediscoverJitter (default a fifth of
	// it), so that the replicas' checks spread out.
	RediscoverEvery, RediscoverJitter time.Duration
}

// Servers implements mcpgate.ServerService on the store, the vault and an
// upstream pool.
type Servers struct {
	core
	keyring   *vault.Keyring
	registry  *connectors.Registry
	pool      *upstream.Pool[UpstreamKey]
	network   upstream.Network
	publicURL string
	gate      discoveryGate
	onChange  func(kind, workspaceID string)
	creds     *UpstreamCredentials
	health    *UpstreamHealth
	checks    store.CheckIntervals
}

var _ mcpgate.ServerService = (*Servers)(nil)

// NewServers returns the upstream server service.
func NewServers(o ServersOptions) *Servers {
	opts := Options{DB: o.DB, Keyring: o.Keyring, Audit: o.Audit, Logger: o.Logger, Now: o.Now}.withCoreDefaults()
	reg := o.Registry
	if reg == nil {
		reg = connectors.NewRegistry()
	}
	if o.Health == nil {
		o.Health = NewUpstreamHealth(UpstreamHealthOptions{DB: o.DB, Logger: opts.Logger, Now: opts.Now})
	}
	if o.RediscoverEvery <= 0 {
		o.RediscoverEvery = DefaultRediscoverEvery
	}
	if o.RediscoverJitter <= 0 {
		o.RediscoverJitter = o.RediscoverEvery / 5
	}
	return &Servers{core: newCore(opts), keyring: o.Keyring, registry: reg, pool: o.Pool, network: o.Network, publicURL: o.PublicURL,
		onChange: o.Invalidate, creds: o.Credentials, health: o.Health,
		checks: store.CheckIntervals{Down: o.Health.ProbeEvery(), Up: o.RediscoverEvery, Jitter: o.RediscoverJitter}}
}

// DefaultRediscoverEvery is how often a server that is up is discovered
// again, so that a changed definition is quarantined without anyone asking.
const DefaultRediscoverEvery = 15 * time.Minute

// changed tells this replica's caches that a workspace's servers changed.
func (s *Servers) changed(workspaceID string) {
	if s.onChange != nil {
		s.onChange(InvalidatePolicy, workspaceID)
	}
}

// Limits on what one server may carry: a credential is a header or two;
// these bound what a mistaken or hostile form can make the vault hold.
const (
	maxServerHeaders   = 16
	maxHeaderValue     = 8 << 10
	maxHeaderName      = 256 // bytes; every member reads the names in the hints
	maxServerURL       = 2048
	maxAliases         = 256
	defaultToolListCap = 2000
	// A discovery holds a connection and up to a catalog's budget in
	// memory for up to the connect timeout: one workspace may hold a few,
	// the gateway a few more, so no tenant can take the others' share.
	maxDiscoveriesPerWorkspace = 2
	maxDiscoveries             = 8
)

// errDiscoveryBusy is the cause of a discovery refused for want of a slot:
// it says nothing of the server's health.
var errDiscoveryBusy = errors.New("no discovery slot")

// discoveryGate counts the discoveries under way, per workspace and in
// all; a slot is reserved before the discovery starts, never counted after.
type discoveryGate struct {
	mu    sync.Mutex
	total int
	byWS  map[string]int
}

// enter reserves a slot for workspace, or says why there is none.
func (g *discoveryGate) enter(workspace string) (leave func(), err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byWS[workspace] >= maxDiscoveriesPerWorkspace {
		return nil, mcpgate.WrapError(mcpgate.ETooMany, errDiscoveryBusy, fmt.Sprintf("this workspace already has %d server "+
			"discoveries under way; try again when they finish", maxDiscoveriesPerWorkspace))
	}
	if g.total >= maxDiscoveries {
		return nil, mcpgate.WrapError(mcpgate.EUnavailable, errDiscoveryBusy,
			"the gateway is discovering as many servers as it may at once; try again shortly")
	}
	if g.byWS == nil {
		g.byWS = map[string]int{}
	}
	g.total++
	g.byWS[workspace]++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.total--
		if g.byWS[workspace]--; g.byWS[workspace] == 0 {
			delete(g.byWS, workspace)
		}
	}, nil
}

// requireAdminChange is the admins-only rule with the workspace's
// two-factor policy, as for every other credential and tool change.
func (s *Servers) requireAdminChange(ctx context.Context, a *mcpgate.Actor) error {
	if err := requireAdmin(a); err != nil {
		return err
	}
	required, enrolled, err := s.db.TwoFactorPolicy(ctx, a.WorkspaceID, a.UserID)
	if err != nil {
		return err
	}
	if required && !enrolled {
		return mcpgate.Errorf(mcpgate.ETOTPEnrolment, "this workspace requires owners and admins to use two-factor sign-in "+
			"before they change tools, servers or credentials: turn it on in Account settings (%s/app/account)", s.publicURL)
	}
	return nil
}

// Servers implements mcpgate.ServerService.
func (s *Servers) Servers(ctx context.Context, a *mcpgate.Actor) ([]mcpgate.Server, error) {
	rows, err := s.db.FindServers(ctx, a.WorkspaceID)
	if err != nil {
		return nil, err
	}
	tools, err := s.db.FindServerTools(ctx, a.WorkspaceID, "")
	if err != nil {
		return nil, err
	}
	byServer := map[string][]store.UpstreamTool{}
	for _, t := range tools {
		byServer[t.Server] = append(byServer[t.Server], t.UpstreamTool)
	}
	out := make([]mcpgate.Server, 0, len(rows))
	for i := range rows {
		out = append(out, *serverView(&rows[i], byServer[rows[i].Name], false))
		maskForMember(a, &out[len(out)-1])
	}
	return out, s.fillCredential(ctx, a, out)
}

// Server implements mcpgate.ServerService.
func (s *Servers) Server(ctx context.Context, a *mcpgate.Actor, name string) (*mcpgate.Server, error) {
	row, err := s.db.FindServer(ctx, a.WorkspaceID, name)
	if err != nil {
		return nil, err
	}
	tools, err := s.db.FindServerTools(ctx, a.WorkspaceID, name)
	if err != nil {
		return nil, err
	}
	ts := make([]store.UpstreamTool, len(tools))
	for i, t := range tools {
		ts[i] = t.UpstreamTool
	}
	v := serverView(row, ts, true)
	maskForMember(a, v)
	if v.ElicitationHostsSeen, err = s.db.FindElicitationHosts(ctx, a.WorkspaceID, name); err != nil {
		return nil, err
	}
	return v, s.fillOneCredential(ctx, a, v)
}

// maskForMember hides from a member what of the URL may be a credential
// (query values, user information), as the audit does: only admins, who
// edit the URL, read it whole.
func maskForMember(a *mcpgate.Actor, v *mcpgate.Server) {
	if !a.CanAdmin() {
		v.URL = maskedURL(v.URL)
	}
}

// AddServer implements mcpgate.ServerService: the input is checked, the
// server discovered with it, and only then is anything stored.
func (s *Servers) AddServer(ctx context.Context, a *mcpgate.Actor, in mcpgate.ServerInput) (*mcpgate.Server, error) {
	if err := s.requireAdminChange(ctx, a); err != nil {
		return nil, err
	}
	in.Name, in.URL = strings.TrimSpace(in.Name), strings.TrimSpace(in.URL)
	if done, srv, err := s.addServerByKind(ctx, a, in); done {
		return srv, err
	}
	headers, err := s.checkInput(in)
	if err != nil {
		return nil, err
	}
	if _, err := s.db.FindServer(ctx, a.WorkspaceID, in.Name); err == nil {
		return nil, errServerExists(in.Name)
	} else if mcpgate.ErrorCode(err) != mcpgate.ENotFound {
		return nil, err
	}
	cat, err := s.discoverAudited(ctx, a, in.Name, upstream.Target{URL: in.URL, Headers: headers})
	if err != nil {
		return nil, err
	}
	if err := aliasesExist(in.Aliases, cat.Tools); err != nil {
		return nil, err
	}
	now := s.now().UTC()
	var rep mergeReport
	err = s.db.ChangeServer(ctx, s.keyring, a.WorkspaceID, in.Name, func(st *store.ServerState) (*store.ServerWrite, error) {
		if st.Server != nil {
			return nil, errServerExists(in.Name)
		}
		srv := store.UpstreamServer{Server: mcpgate.Server{Name: in.Name, URL: in.URL, Headers: hintsOf(headers), Enabled: true}}
		setDiscovered(&srv, cat, now)
		tools, r, err := mergeCatalog(nil, cat.Tools)
		if err != nil {
			return nil, err
		}
		rep = r
		s.assignNames(in.Name, tools, st.Taken, in.Aliases)
		return &store.ServerWrite{Server: srv, Headers: headers, Tools: tools, ActorID: a.UserID, NextCheckAt: s.nextRediscovery(now)}, nil
	})
	if err != nil {
		return nil, err
	}
	s.changed(a.WorkspaceID)
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerAdded, map[string]any{"server": in.Name, "url": auditURL(in.URL),
		"headers": headerNames(headers), "tools": len(cat.Tools), "enabled_tools": rep.enabled}))
	return s.Server(ctx, a, in.Name)
}

// checkInput refuses what no connection could make right, and returns the
// credential headers in their canonical form.
func (s *Servers) checkInput(in mcpgate.ServerInput) (map[string]mcpgate.Secret, error) {
	if err := s.checkName(in.Name); err != nil {
		return nil, err
	}
	if err := s.checkURL(in.URL); err != nil {
		return nil, err
	}
	if err := checkAliases(in.Aliases); err != nil {
		return nil, err
	}
	return checkHeaders(in.Headers, nil)
}

// UpdateServer implements mcpgate.ServerService. A change of URL or
// credential, and turning the server on, connect to it first; what it then
// lists is diffed as a re-discovery is.
func (s *Servers) UpdateServer(ctx context.Context, a *mcpgate.Actor, name string, upd mcpgate.ServerUpdate) (*mcpgate.Server, error) {
	if err := s.requireAdminChange(ctx, a); err != nil {
		return nil, err
	}
	if srv, err := s.updateOAuth(ctx, a, name, upd); srv != nil || err != nil {
		return srv, err
	}
	relays, err := relaySettings(&upd)
	if err != nil {
		return nil, err
	}
	if upd.URL == nil && upd.Headers == nil && upd.Aliases == nil && upd.Enabled == nil && upd.SessionScope == nil && relays == nil {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "give url, headers, aliases, enabled, per_person, session_scope, "+
			"allow_sampling, allow_roots or elicitation_url_hosts")
	}
	if upd.SessionScope != nil {
		if err := upd.SessionScope.Validate(); err != nil {
			return nil, err
		}
	}
	if err := checkAliases(upd.Aliases); err != nil {
		return nil, err
	}
	cur, err := s.db.FindServer(ctx, a.WorkspaceID, name)
	if err != nil {
		return nil, err
	}
	target, err := s.updatedTarget(ctx, a, cur, upd)
	if err != nil {
		return nil, err
	}
	enabled := cur.Enabled
	if upd.Enabled != nil {
		enabled = *upd.Enabled
	}
	var cat *upstream.Catalog
	if upd.URL != nil || upd.Headers != nil || (enabled && !cur.Enabled) {
		if cat, err = s.discoverAudited(ctx, a, name, target); err != nil {
			return nil, err
		}
		if err := aliasesExist(upd.Aliases, cat.Tools); err != nil {
			return nil, err
		}
	}
	rep, err := s.storeUpdate(ctx, a, cur, upd, relays, target, enabled, cat)
	if err != nil {
		return nil, err
	}
	args := map[string]any{"server": name}
	if upd.URL != nil {
		args["url"] = auditURL(target.URL)
		if !sameOrigin(cur.URL, target.URL) {
			args["origin_changed"] = true
		}
	}
	if upd.Headers != nil {
		args["headers"] = headerNames(target.Headers)
	}
	if upd.Enabled != nil {
		args["enabled"] = enabled
	}
	if upd.Aliases != nil {
		args["aliases"] = upd.Aliases
	}
	if upd.SessionScope != nil {
		if err := s.db.SetServerSessionScope(ctx, a.WorkspaceID, name, *upd.SessionScope); err != nil {
			return nil, err
		}
		args["session_scope"] = *upd.SessionScope
	}
	addRelayArgs(args, relays)
	rep.addTo(args)
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerUpdated, args))
	s.recordQuarantined(ctx, a, name, rep)
	return s.Server(ctx, a, name)
}

// updatedTarget is where and with what credential the server is reached
// once upd applies: a header given with an empty value keeps its stored
// value.
func (s *Servers) updatedTarget(ctx context.Context, a *mcpgate.Actor, cur *store.UpstreamServer, upd mcpgate.ServerUpdate) (upstream.Target, error) {
	target := upstream.Target{URL: cur.URL}
	if upd.URL != nil {
		target.URL = strings.TrimSpace(*upd.URL)
		if err := s.checkURL(target.URL); err != nil {
			return target, err
		}
	}
	stored, err := s.db.OpenServerHeaders(ctx, s.keyring, a.WorkspaceID, cur.Name)
	if err != nil {
		return target, err
	}
	if !sameOrigin(cur.URL, target.URL) {
		// The stored credential was given for the old host: sent to the
		// new one, any admin could read it there. It is given again.
		if err := credentialGivenAgain(upd.Headers, stored); err != nil {
			return target, err
		}
		stored = nil
	}
	target.Headers = stored
	if upd.Headers != nil {
		target.Headers, err = checkHeaders(upd.Headers, stored)
	}
	return target, err
}

// credentialGivenAgain refuses a change of origin that would keep a stored
// header value: each value is given in the update, or the header dropped.
func credentialGivenAgain(given, stored map[string]mcpgate.Secret) error {
	if given == nil && len(stored) > 0 {
		return mcpgate.Errorf(mcpgate.EInvalid, "the URL moves to another scheme, host or port: give the credential "+
			"headers again (the stored credential is not sent to a new host)")
	}
	for name, v := range given {
		if strings.TrimSpace(v.Reveal()) == "" {
			return mcpgate.Errorf(mcpgate.EInvalid, "the URL moves to another scheme, host or port: give the value of "+
				"header %q again (the stored credential is not sent to a new host)", strings.TrimSpace(name))
		}
	}
	return nil
}

// sameOrigin reports whether two URLs have one scheme, host and port (the
// scheme's default when none is given).
func sameOrigin(a, b string) bool {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	if errA != nil || errB != nil {
		return false
	}
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if strings.EqualFold(u.Scheme, "http") {
			return "80"
		}
		return "443"
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Hostname(), ub.Hostname()) && port(ua) == port(ub)
}

// storeUpdate writes an update, with the catalog cat found (nil: none was
// needed), refusing one that raced another change of the server.
func (s *Servers) storeUpdate(ctx context.Context, a *mcpgate.Actor, cur *store.UpstreamServer, upd mcpgate.ServerUpdate,
	relays *store.RelaySettings, target upstream.Target, enabled bool, cat *upstream.Catalog) (mergeReport, error) {
	now := s.now().UTC()
	var rep mergeReport
	err := s.db.ChangeServer(ctx, s.keyring, a.WorkspaceID, cur.Name, func(st *store.ServerState) (*store.ServerWrite, error) {
		if st.Server == nil || st.Server.ID != cur.ID {
			return nil, mcpgate.Errorf(mcpgate.ENotFound, "no upstream server of that name in this workspace")
		}
		if !st.Server.UpdatedAt.Equal(cur.UpdatedAt) {
			return nil, errChangedMeanwhile
		}
		w := &store.ServerWrite{Server: *st.Server, KeepHeaders: upd.Headers == nil, Headers: target.Headers, Relays: relays,
			ActorID: a.UserID}
		w.Server.URL, w.Server.Enabled = target.URL, enabled
		if upd.Headers != nil {
			w.Server.Headers = hintsOf(target.Headers)
		}
		w.Tools = st.Tools
		if cat != nil {
			setDiscovered(&w.Server, cat, now)
			w.NextCheckAt = s.nextRediscovery(now)
			var err error
			if w.Tools, rep, err = mergeCatalog(st.Tools, cat.Tools); err != nil {
				return nil, err
			}
		} else if err := aliasesExist(upd.Aliases, storedTools(st.Tools)); err != nil {
			return nil, err
		}
		aliases := upd.Aliases
		if aliases == nil {
			aliases = aliasesOf(st.Tools)
		}
		s.assignNames(cur.Name, w.Tools, st.Taken, aliases)
		return w, nil
	})
	if err == nil {
		s.changed(a.WorkspaceID)
	}
	return rep, err
}

// discoverAudited discovers target, auditing a failure as the admin's
// attempt (header names only).
func (s *Servers) discoverAudited(ctx context.Context, a *mcpgate.Actor, name string, target upstream.Target) (*upstream.Catalog, error) {
	leave, err := s.gate.enter(a.WorkspaceID)
	if err != nil {
		return nil, err
	}
	defer leave()
	var cat *upstream.Catalog
	err = s.creds.Do(ctx, a, name, target, func(t upstream.Target) error {
		var err error
		cat, err = s.discover(ctx, t)
		return err
	})
	if err != nil {
		ev := mcpgate.NewAdminEvent(a, mcpgate.ActionServerDiscoveryFailed, map[string]any{"server": name,
			"url": auditURL(target.URL), "headers": headerNames(target.Headers)})
		ev.Outcome, ev.Message = mcpgate.OutcomeError, cutText(mcpgate.ErrorMessage(err), maxMessage)
		s.record(ctx, ev)
	}
	return cat, err
}

// RemoveServer implements mcpgate.ServerService.
func (s *Servers) RemoveServer(ctx context.Context, a *mcpgate.Actor, name string) error {
	if err := s.requireAdminChange(ctx, a); err != nil {
		return err
	}
	s.revokeGrantsOf(ctx, a, name)
	if err := s.db.DeleteServer(ctx, a.WorkspaceID, name); err != nil {
		return err
	}
	s.changed(a.WorkspaceID)
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerRemoved, map[string]any{"server": name}))
	return nil
}

// DiscoverServer implements mcpgate.ServerService. A failure is kept as
// the server's health, so the dashboard shows it.
func (s *Servers) DiscoverServer(ctx context.Context, a *mcpgate.Actor, name string) (*mcpgate.Server, error) {
	if err := s.requireAdminChange(ctx, a); err != nil {
		return nil, err
	}
	cur, err := s.db.FindServer(ctx, a.WorkspaceID, name)
	if err != nil {
		return nil, err
	}
	headers, err := s.db.OpenServerHeaders(ctx, s.keyring, a.WorkspaceID, name)
	if err != nil {
		return nil, err
	}
	cat, err := s.discoverAudited(ctx, a, name, upstream.Target{URL: cur.URL, Headers: headers})
	if errors.Is(err, errDiscoveryBusy) {
		return nil, err
	}
	if err != nil {
		if s.health.markDown(ctx, a.WorkspaceID, name, mcpgate.ErrorMessage(err)) {
			s.changed(a.WorkspaceID)
		}
		return nil, err
	}
	rep, _, err := s.storeDiscovery(ctx, a.WorkspaceID, cur, cat, a.UserID)
	if err != nil {
		return nil, err
	}
	args := map[string]any{"server": name, "tools": len(cat.Tools)}
	rep.addTo(args)
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerDiscovered, args))
	s.recordQuarantined(ctx, a, name, rep)
	return s.Server(ctx, a, name)
}

// ApproveServerTool implements mcpgate.ServerService. The pin is required:
// an approval that named no change would trust whatever a re-discovery
// put in waiting between the admin's reading and the click.
func (s *Servers) ApproveServerTool(ctx context.Context, a *mcpgate.Actor, server, tool, expectedPin string) (*mcpgate.Server, error) {
	if err := s.requireAdminChange(ctx, a); err != nil {
		return nil, err
	}
	if expectedPin == "" {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "expected_pin is required: the pin of the change you reviewed")
	}
	var change *mcpgate.ToolChange
	var pin string
	err := s.changeTool(ctx, a, server, tool, func(t *store.UpstreamTool) error {
		if !t.Quarantined {
			return mcpgate.Errorf(mcpgate.EConflict, "the tool %q has no changed definition waiting for approval", tool)
		}
		c, err := toolChange(t.Definition, t.Pending)
		if err != nil {
			return err
		}
		next, err := upstream.ParseTool(t.Pending)
		if err != nil {
			return err
		}
		if pin, err = upstream.Pin(next); err != nil {
			return err
		}
		if pin != expectedPin {
			return mcpgate.Errorf(mcpgate.EConflict, "the tool %q changed again since you reviewed it; reload and review the change waiting now", tool)
		}
		change = c
		t.Definition, t.Pending, t.Pin, t.Quarantined, t.Hints = next.Raw, nil, pin, false, hintsFrom(next.Annotations)
		return nil
	})
	if err != nil {
		return nil, err
	}
	args := map[string]any{"server": server, "tool": tool, "fields": change.Fields, "pin": pin}
	if len(change.Loosened) > 0 {
		args["loosened"] = loosenedNames(change.Loosened)
	}
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerToolApproved, args))
	return s.Server(ctx, a, server)
}

// SetServerTool implements mcpgate.ServerService. Turning a tool on pins
// the definition the admin sees; turning it off drops the pin, so that a
// tool trusted again is trusted as it then stands.
func (s *Servers) SetServerTool(ctx context.Context, a *mcpgate.Actor, server, tool string, upd mcpgate.ToolUpdate) (*mcpgate.Server, error) {
	if err := s.requireAdminChange(ctx, a); err != nil {
		return nil, err
	}
	if upd.Approval != nil && !upd.Approval.Valid() {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "approval must be none, model or human")
	}
	if upd.Enabled == nil && upd.Approval == nil {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "give enabled, approval or both")
	}
	err := s.changeTool(ctx, a, server, tool, func(t *store.UpstreamTool) error { return applyToolUpdate(t, upd) })
	if err != nil {
		return nil, err
	}
	args := map[string]any{"server": server, "tool": tool}
	if upd.Enabled != nil {
		args["enabled"] = *upd.Enabled
	}
	if upd.Approval != nil {
		args["approval"] = string(*upd.Approval)
	}
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerToolUpdated, args))
	return s.Server(ctx, a, server)
}

// applyToolUpdate sets a tool on or off and its approval mode. On, its
// definition as it stands is pinned; off, the pin goes, and a change that
// waited for approval is taken as the tool's definition (nothing trusts it).
func applyToolUpdate(t *store.UpstreamTool, upd mcpgate.ToolUpdate) error {
	if upd.Approval != nil {
		t.Approval = *upd.Approval
	}
	switch {
	case upd.Enabled == nil:
		return nil
	case !*upd.Enabled:
		if t.Quarantined {
			next, err := upstream.ParseTool(t.Pending)
			if err != nil {
				return err
			}
			t.Definition, t.Hints = next.Raw, hintsFrom(next.Annotations)
		}
		t.Enabled, t.Pin, t.Quarantined, t.Pending = false, "", false, nil
		return nil
	case t.Quarantined:
		return mcpgate.Errorf(mcpgate.EConflict, "the tool %q changed since it was trusted: review and approve the change first", t.Name)
	case !t.Listed:
		return mcpgate.Errorf(mcpgate.EConflict, "the server no longer lists the tool %q", t.Name)
	}
	def, err := upstream.ParseTool(t.Definition)
	if err != nil {
		return err
	}
	if t.Pin, err = upstream.Pin(def); err != nil {
		return err
	}
	t.Enabled = true
	return nil
}

// changeTool applies fn to one tool of a server under the workspace's
// server lock.
func (s *Servers) changeTool(ctx context.Context, a *mcpgate.Actor, server, tool string, fn func(*store.UpstreamTool) error) error {
	err := changeServerTool(ctx, s.db, s.keyring, a, server, tool, fn)
	if err == nil {
		s.changed(a.WorkspaceID)
	}
	return err
}

// changeServerTool applies fn to one tool of a server under the
// workspace's server lock: the one way a catalog row changes, whether the
// server service or the tool service (by the exposed name) is asked.
func changeServerTool(ctx context.Context, db *store.DB, keyring *vault.Keyring, a *mcpgate.Actor, server, tool string,
	fn func(*store.UpstreamTool) error) error {
	return db.ChangeServer(ctx, keyring, a.WorkspaceID, server, func(st *store.ServerState) (*store.ServerWrite, error) {
		if st.Server == nil {
			return nil, mcpgate.Errorf(mcpgate.ENotFound, "no upstream server of that name in this workspace")
		}
		i := slices.IndexFunc(st.Tools, func(t store.UpstreamTool) bool { return t.Name == tool })
		if i < 0 {
			return nil, mcpgate.Errorf(mcpgate.ENotFound, "the server has no tool %q", tool)
		}
		if err := fn(&st.Tools[i]); err != nil {
			return nil, err
		}
		return &store.ServerWrite{Server: *st.Server, KeepHeaders: true, Tools: st.Tools, ActorID: a.UserID}, nil
	})
}

func (s *Servers) recordQuarantined(ctx context.Context, a *mcpgate.Actor, server string, rep mergeReport) {
	for _, q := range rep.quarantined {
		args := map[string]any{"server": server, "tool": q.tool, "fields": q.change.Fields}
		if len(q.change.Loosened) > 0 {
			args["loosened"] = loosenedNames(q.change.Loosened)
		}
		s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionServerToolQuarantined, args))
	}
}

var errChangedMeanwhile = mcpgate.Errorf(mcpgate.EConflict, "the server was changed by someone else meanwhile; reload and try again")

func errServerExists(name string) error {
	return mcpgate.Errorf(mcpgate.EConflict, "this workspace already has a server named %q", name)
}

// discover lists what target serves, turning the hop's errors into a
// message that says why the server cannot be used (never a credential:
// the hop replaces their values in everything it reports).
func (s *Servers) discover(ctx context.Context, target upstream.Target) (*upstream.Catalog, error) {
	if s.pool == nil {
		return nil, mcpgate.Errorf(mcpgate.EUnavailable, "this gateway cannot reach upstream servers")
	}
	cat, err := s.pool.Discover(ctx, target)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, mcpgate.WrapError(mcpgate.ErrorCode(err), err, cutText("the gateway could not use this server: "+mcpgate.ErrorMessage(err), maxMessage))
	}
	if len(cat.Invalid) > 0 {
		// A definition the gateway cannot read one way only (a member given
		// twice, no name, a name listed twice) could show a reviewer one tool
		// and a client another: the server is refused until it is fixed.
		reasons := make([]string, 0, 3)
		for _, inv := range cat.Invalid[:min(len(cat.Invalid), 3)] {
			reasons = append(reasons, cutText(inv.Reason, 120))
		}
		return nil, mcpgate.Errorf(mcpgate.EUpstream, "the server lists %d tool definitions the gateway cannot read (%s); fix them on the server",
			len(cat.Invalid), strings.Join(reasons, "; "))
	}
	if len(cat.Tools) > defaultToolListCap {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "the server lists %d tools; the gateway takes at most %d from one server",
			len(cat.Tools), defaultToolListCap)
	}
	return cat, nil
}

// maxMessage bounds a message that quotes the upstream (an error's text,
// the server's last_error, the audit row's message).
const maxMessage = 500

// cutText cuts an upstream's text for a message.
func cutText(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func (s *Servers) checkName(name string) error {
	if err := upstream.ValidateServerName(name); err != nil {
		return mcpgate.WrapError(mcpgate.EInvalid, err, err.Error())
	}
	if _, ok := s.registry.Connector(name); ok {
		return mcpgate.Errorf(mcpgate.EInvalid, "%q is the name of one of the gateway's connectors; choose another", name)
	}
	return nil
}

// checkURL refuses, before any connection, a URL the hop would refuse:
// the hop checks every address it dials again, so a name that resolves
// into a network it may not reach is refused there.
func (s *Servers) checkURL(raw string) error {
	if raw == "" {
		return mcpgate.Errorf(mcpgate.EInvalid, "url is required")
	}
	if len(raw) > maxServerURL {
		return mcpgate.Errorf(mcpgate.EInvalid, "the URL is longer than %d characters", maxServerURL)
	}
	u, err := s.network.CheckURL(raw)
	if err != nil {
		return mcpgate.WrapError(mcpgate.EInvalid, err, err.Error())
	}
	host := strings.Trim(u.Hostname(), "[]")
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return nil // a name: the dial judges each address it resolves to
	}
	addr = addr.Unmap()
	private := slices.ContainsFunc(s.network.Private, func(p netip.Prefix) bool { return p.Contains(addr) })
	switch {
	case u.Scheme == "http" && !private:
		return mcpgate.Errorf(mcpgate.EInvalid, "plain http is allowed only to the private networks an operator lists in "+
			"UPSTREAM_PRIVATE_NETWORKS, and %s is not in one; use https", addr)
	case !private && (s.network.Public == nil || !s.network.Public(addr)):
		return mcpgate.Errorf(mcpgate.EInvalid, "%s is not a public address, and not in a network the operator lists in "+
			"UPSTREAM_PRIVATE_NETWORKS: the gateway may not connect to it", addr)
	}
	return nil
}

// checkHeaders validates a credential and fills in, from stored, the
// values of headers given empty (kept as they are). Names are kept in
// their canonical form, so that one header cannot be given twice.
func checkHeaders(in, stored map[string]mcpgate.Secret) (map[string]mcpgate.Secret, error) {
	if len(in) > maxServerHeaders {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "at most %d headers", maxServerHeaders)
	}
	storedCanon := map[string]mcpgate.Secret{}
	for k, v := range stored {
		storedCanon[textproto.CanonicalMIMEHeaderKey(k)] = v
	}
	out := make(map[string]mcpgate.Secret, len(in))
	for name, v := range in {
		name = strings.TrimSpace(name)
		if len(name) > maxHeaderName {
			return nil, mcpgate.Errorf(mcpgate.EInvalid, "a header name is longer than %d bytes", maxHeaderName)
		}
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if _, dup := out[canon]; dup {
			return nil, mcpgate.Errorf(mcpgate.EInvalid, "the header %q is given twice", name)
		}
		val := strings.TrimSpace(v.Reveal())
		if val == "" {
			kept, ok := storedCanon[canon]
			if !ok {
				return nil, mcpgate.Errorf(mcpgate.EInvalid, "the header %q has no value", name)
			}
			out[canon] = kept
			continue
		}
		if len(val) > maxHeaderValue {
			return nil, mcpgate.Errorf(mcpgate.EInvalid, "the value of header %q is longer than %d bytes", name, maxHeaderValue)
		}
		out[canon] = mcpgate.Secret(val)
	}
	if err := upstream.ValidateHeaders(out); err != nil {
		return nil, mcpgate.WrapError(mcpgate.EInvalid, err, err.Error())
	}
	return out, nil
}

func checkAliases(aliases map[string]string) error {
	if len(aliases) > maxAliases {
		return mcpgate.Errorf(mcpgate.EInvalid, "at most %d aliases", maxAliases)
	}
	return nil
}

func aliasesExist(aliases map[string]string, tools []upstream.Tool) error {
	for tool, alias := range aliases {
		if alias == "" {
			continue
		}
		if !slices.ContainsFunc(tools, func(t upstream.Tool) bool { return t.Name == tool }) {
			return mcpgate.Errorf(mcpgate.EInvalid, "an alias names the tool %q, which the server does not list", tool)
		}
	}
	return nil
}

// storedTools reads the stored definitions back as tools (for checks that
// need only their names).
func storedTools(ts []store.UpstreamTool) []upstream.Tool {
	out := make([]upstream.Tool, 0, len(ts))
	for _, t := range ts {
		if t.Listed {
			out = append(out, upstream.Tool{Name: t.Name})
		}
	}
	return out
}

func aliasesOf(ts []store.UpstreamTool) map[string]string {
	m := map[string]string{}
	for _, t := range ts {
		if t.Alias != "" {
			m[t.Name] = t.Alias
		}
	}
	return m
}

// assignNames gives each listed tool its exposed name, or the reason it
// has none: names other servers of the workspace hold and the connectors'
// tool names are taken, so a name once given is never moved to another
// tool by a later registration.
func (s *Servers) assignNames(server string, tools []store.UpstreamTool, taken []string, aliases map[string]string) {
	reserved := slices.Clone(taken)
	for _, t := range s.registry.Tools() {
		reserved = append(reserved, t.Name)
	}
	var names []string
	routes := map[upstream.Route]string{}
	for _, t := range tools {
		if t.Listed {
			names = append(names, t.Name)
			if a := aliases[t.Name]; a != "" {
				routes[upstream.Route{Server: server, Tool: t.Name}] = a
			}
		}
	}
	table, problems, err := upstream.ExposeNames([]upstream.ServerTools{{Server: server, Tools: names}}, reserved, routes)
	why := map[string]string{}
	for _, p := range problems {
		why[p.Route.Tool] = p.Name + " " + p.Reason
	}
	for i := range tools {
		t := &tools[i]
		t.Alias = aliases[t.Name]
		t.ExposedName, t.NameProblem = "", ""
		if !t.Listed {
			continue
		}
		if err != nil {
			t.NameProblem = err.Error()
			continue
		}
		if n, ok := table.Exposed(upstream.Route{Server: server, Tool: t.Name}); ok {
			t.ExposedName = n
		} else {
			t.NameProblem = why[t.Name]
		}
	}
}
