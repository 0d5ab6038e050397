package e2bsim

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"
)

// networkConfig is E2B's SandboxNetworkConfig.
type networkConfig struct {
	AllowPublicTraffic *bool                    `json:"allowPublicTraffic,omitempty"`
	AllowOut           []string                 `json:"allowOut,omitempty"`
	DenyOut            []string                 `json:"denyOut,omitempty"`
	EgressProxy        *egressProxy             `json:"egressProxy,omitempty"`
	MaskRequestHost    *string                  `json:"maskRequestHost,omitempty"`
	Rules              map[string][]networkRule `json:"rules,omitempty"`
}

type egressProxy struct {
	Address  string `json:"address"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

type networkRule struct {
	Transform *struct {
		Headers map[string]string `json:"headers,omitempty"`
	} `json:"transform,omitempty"`
}

// newSandbox is E2B's NewSandbox body.
type newSandbox struct {
	TemplateID      *string `json:"templateID"`
	Timeout         *int32  `json:"timeout"`
	AutoPause       *bool   `json:"autoPause"`
	AutoPauseMemory *bool   `json:"autoPauseMemory"`
	AutoResume      *struct {
		Enabled bool `json:"enabled"`
	} `json:"autoResume"`
	Secure              bool              `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *networkConfig    `json:"network"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
}

// sandboxResponse is E2B's Sandbox (create and connect).
type sandboxResponse struct {
	TemplateID         string `json:"templateID"`
	SandboxID          string `json:"sandboxID"`
	ClientID           string `json:"clientID"`
	EnvdVersion        string `json:"envdVersion"`
	Alias              string `json:"alias,omitempty"`
	EnvdAccessToken    string `json:"envdAccessToken,omitempty"`
	TrafficAccessToken string `json:"trafficAccessToken,omitempty"`
}

const (
	clientID    = "6532622b"
	envdVersion = "0.2.4"
	maxBody     = 1 << 20
)

var sandboxIDShape = regexp.MustCompile(`^(i[a-z0-9]{20})(-[A-Za-z0-9]+)?$`)

// decodeBody reads an optional JSON body into v; E2B's validator answers 400
// for a malformed one.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, required bool) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	err := dec.Decode(v)
	if err == nil || (!required && err.Error() == "EOF") {
		return true
	}
	if required && err.Error() == "EOF" {
		writeError(w, http.StatusBadRequest, "request body has an error: value is required but missing", "")
		return false
	}
	writeError(w, http.StatusBadRequest, "request body has an error: "+err.Error(), "")
	return false
}

// findSandbox validates the path id and returns the team's sandbox, writing
// 400 or 404 itself; callers hold s.mu.
func (s *Server) findSandbox(w http.ResponseWriter, r *http.Request, t *team) (*sandbox, string, bool) {
	raw := r.PathValue("sandboxID")
	m := sandboxIDShape.FindStringSubmatch(raw)
	if m == nil {
		writeError(w, http.StatusBadRequest, "Invalid sandbox ID", "")
		return nil, "", false
	}
	sb := s.sandboxes[m[1]]
	if sb == nil || sb.team != t.id {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Sandbox %q doesn't exist or you don't have access to it", m[1]), "")
		return nil, m[1], false
	}
	return sb, m[1], true
}

// resolveTemplate finds a template reference (ID, alias or namespace/alias,
// optionally :tag; or a snapshot ID). It returns the HTTP status to answer
// when it cannot. Callers hold s.mu.
func (s *Server) resolveTemplate(t *team, ref string) (*template, int, string) {
	name, tag, hasTag := strings.Cut(ref, ":")
	for _, sn := range t.snapshots {
		if sn.snapshotID(t) == ref || sn.templateID == name || (sn.name != "" && (sn.name == name || t.namespace+"/"+sn.name == name)) {
			return sn.base, 0, ""
		}
	}
	if hasTag && tag != "default" {
		return nil, http.StatusNotFound, fmt.Sprintf("tag '%s' for template '%s' not found", tag, name)
	}
	for _, tp := range append(append([]*template{}, t.templates...), s.public...) {
		if tp.matches(name) {
			if tp.readyBuild() == nil {
				return nil, http.StatusBadRequest, fmt.Sprintf("template '%s' has no ready build", name)
			}
			return tp, 0, ""
		}
	}
	for _, other := range s.teams {
		for _, tp := range other.templates {
			if other != t && tp.id == name {
				return nil, http.StatusForbidden, fmt.Sprintf("You don't have access to this sandbox template (%s)", name)
			}
		}
	}
	return nil, http.StatusNotFound, fmt.Sprintf("template '%s' not found", name)
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	var in newSandbox
	if !decodeBody(w, r, &in, true) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.team(r)
	now := s.now()
	if msg := s.validateNew(&in); msg != "" {
		writeError(w, http.StatusBadRequest, msg, "")
		return
	}
	tp, status, msg := s.resolveTemplate(t, *in.TemplateID)
	if tp == nil {
		writeError(w, status, msg, "")
		return
	}
	if s.running(t.id) >= s.maxRunning {
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf(
			"you have reached the maximum number of concurrent E2B sandboxes (%d)", s.maxRunning), "")
		return
	}
	timeout := int32(15)
	if in.Timeout != nil {
		timeout = *in.Timeout
	}
	b := tp.readyBuild()
	sb := &sandbox{
		id: "i" + s.randString(20, "abcdefghijklmnopqrstuvwxyz0123456789"), team: t.id, template: tp, alias: tp.alias,
		state: "running", createdAt: now, startedAt: now, endAt: now.Add(time.Duration(timeout) * time.Second),
		metadata: in.Metadata, cpu: b.cpu, memMB: b.memMB, diskMB: b.diskMB,
		autoPause: in.AutoPause != nil && *in.AutoPause, autoPauseMemory: in.AutoPauseMemory == nil || *in.AutoPauseMemory,
		autoResume: in.AutoResume != nil && in.AutoResume.Enabled, secure: in.Secure,
		allowInternet: in.AllowInternetAccess, network: in.Network,
	}
	s.sandboxes[sb.id] = sb
	tp.spawnCount++
	tp.lastSpawnedAt = &now
	for _, v := range in.EnvVars {
		s.secret(v)
	}
	writeJSON(w, http.StatusCreated, s.sandboxResponse(sb))
}

// validateNew checks a NewSandbox as E2B does and records the secrets it
// carries; callers hold s.mu.
func (s *Server) validateNew(in *newSandbox) string {
	switch {
	case in.TemplateID == nil:
		return `request body has an error: doesn't match schema: Error at "/templateID": property "templateID" is missing`
	case *in.TemplateID == "":
		return "templateID must not be empty"
	case in.Timeout != nil && *in.Timeout <= 0:
		return "Timeout must be greater than 0"
	case in.Timeout != nil && time.Duration(*in.Timeout)*time.Second > s.maxLifetime:
		return fmt.Sprintf("Timeout cannot be greater than %d hours", int(s.maxLifetime.Hours()))
	case in.AutoPauseMemory != nil && (in.AutoPause == nil || !*in.AutoPause):
		return "autoPauseMemory can only be set together with autoPause: true"
	case in.AutoPauseMemory != nil && !*in.AutoPauseMemory && in.AutoResume != nil && in.AutoResume.Enabled:
		return "autoPauseMemory: false cannot be combined with autoResume"
	}
	n := in.Network
	if n == nil {
		return ""
	}
	if n.AllowPublicTraffic != nil && !*n.AllowPublicTraffic && !in.Secure {
		return "network.allowPublicTraffic: false requires secure: true"
	}
	if len(n.Rules) > 10 {
		return "network.rules: at most 10 domains"
	}
	for _, dst := range n.AllowOut {
		if net.ParseIP(dst) == nil && !strings.Contains(dst, "/") && !containsStr(n.DenyOut, "0.0.0.0/0") {
			return "network.allowOut: domains require 0.0.0.0/0 in denyOut"
		}
	}
	for _, rules := range n.Rules {
		for _, rule := range rules {
			if rule.Transform != nil {
				for _, v := range rule.Transform.Headers {
					s.secret(v)
				}
			}
		}
	}
	if p := n.EgressProxy; p != nil {
		s.secret(p.Username)
		s.secret(p.Password)
	}
	return ""
}

func containsStr(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// sandboxResponse mints the tokens E2B returns on create, connect and
// resume; callers hold s.mu.
func (s *Server) sandboxResponse(sb *sandbox) sandboxResponse {
	out := sandboxResponse{TemplateID: sb.template.id, SandboxID: sb.id, ClientID: clientID, EnvdVersion: envdVersion, Alias: sb.alias}
	if sb.secure {
		out.EnvdAccessToken = s.token("ea_")
	}
	if sb.network != nil && sb.network.AllowPublicTraffic != nil && !*sb.network.AllowPublicTraffic {
		out.TrafficAccessToken = s.token("ta_")
	}
	return out
}

// listedSandbox is E2B's ListedSandbox; sandboxDetail adds the rest.
type listedSandbox struct {
	TemplateID  string            `json:"templateID"`
	Alias       string            `json:"alias,omitempty"`
	SandboxID   string            `json:"sandboxID"`
	ClientID    string            `json:"clientID"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	CPUCount    int32             `json:"cpuCount"`
	MemoryMB    int32             `json:"memoryMB"`
	DiskSizeMB  int32             `json:"diskSizeMB"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	State       string            `json:"state"`
	EnvdVersion string            `json:"envdVersion"`
}

type sandboxDetail struct {
	listedSandbox
	EnvdAccessToken     string         `json:"envdAccessToken,omitempty"`
	AllowInternetAccess *bool          `json:"allowInternetAccess,omitempty"`
	Network             *networkConfig `json:"network,omitempty"`
	Lifecycle           lifecycle      `json:"lifecycle"`
}

type lifecycle struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

func listed(sb *sandbox) listedSandbox {
	out := listedSandbox{TemplateID: sb.template.id, Alias: sb.alias, SandboxID: sb.id, ClientID: clientID,
		StartedAt: sb.startedAt, EndAt: sb.endAt, CPUCount: sb.cpu, MemoryMB: sb.memMB, DiskSizeMB: sb.diskMB,
		Metadata: sb.metadata, State: sb.state, EnvdVersion: envdVersion}
	if sb.state == "paused" {
		out.Alias = "" // read from the snapshot, where E2B loses it
	}
	return out
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, _, ok := s.findSandbox(w, r, s.team(r))
	if !ok {
		return
	}
	out := sandboxDetail{listedSandbox: listed(sb), AllowInternetAccess: sb.allowInternet,
		Lifecycle: lifecycle{AutoResume: sb.autoResume, OnTimeout: "kill"}}
	if sb.autoPause {
		out.Lifecycle.OnTimeout = "pause"
	}
	if sb.secure {
		// Paused sandboxes get a freshly minted token on every read, as on E2B.
		out.EnvdAccessToken = s.token("ea_")
	}
	if n := sb.network; n != nil {
		nn := *n
		if n.EgressProxy != nil {
			p := *n.EgressProxy
			p.Password = "" // E2B never returns the password
			nn.EgressProxy = &p
		}
		out.Network = &nn
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, _, ok := s.findSandbox(w, r, s.team(r))
	if !ok {
		return
	}
	delete(s.sandboxes, sb.id)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleTimeout(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Timeout *int32 `json:"timeout"`
	}
	if !decodeBody(w, r, &in, true) {
		return
	}
	if in.Timeout == nil || *in.Timeout < 0 {
		writeError(w, http.StatusBadRequest, `request body has an error: doesn't match schema: Error at "/timeout": property "timeout" is missing or below 0`, "")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, id, ok := s.findSandbox(w, r, s.team(r))
	if !ok {
		return
	}
	if sb.state != "running" {
		writeError(w, http.StatusConflict, fmt.Sprintf("Sandbox %q is paused", id), "")
		return
	}
	now := s.now()
	maxEnd := sb.startedAt.Add(s.maxLifetime)
	if !now.Before(maxEnd) {
		writeError(w, http.StatusBadRequest, "Sandbox has already reached its maximum instance length", "")
		return
	}
	end := now.Add(time.Duration(*in.Timeout) * time.Second)
	if end.After(maxEnd) {
		end = maxEnd // E2B clamps silently
	}
	sb.endAt = end
	s.sweep(now) // timeout 0 ends it now
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Memory *bool `json:"memory"`
	}
	if !decodeBody(w, r, &in, false) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, id, ok := s.findSandbox(w, r, s.team(r))
	if !ok {
		return
	}
	if sb.state != "running" {
		writeError(w, http.StatusConflict, fmt.Sprintf("Sandbox %q is already paused", id), "")
		return
	}
	sb.pause(s.now(), in.Memory == nil || *in.Memory)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleConnect(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Timeout *int32 `json:"timeout"`
		Memory  *bool  `json:"memory"`
	}
	if !decodeBody(w, r, &in, true) {
		return
	}
	if in.Timeout == nil || *in.Timeout < 0 {
		writeError(w, http.StatusBadRequest, `request body has an error: doesn't match schema: Error at "/timeout": property "timeout" is missing or below 0`, "")
		return
	}
	if in.Memory != nil {
		writeError(w, http.StatusBadRequest, "the memory option is not enabled for this team", "sandbox_memory_override_disabled")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.team(r)
	sb, _, ok := s.findSandbox(w, r, t)
	if !ok {
		return
	}
	now := s.now()
	timeout := time.Duration(*in.Timeout) * time.Second
	if timeout > s.maxLifetime {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Timeout cannot be greater than %d hours", int(s.maxLifetime.Hours())), "")
		return
	}
	if sb.state == "running" {
		// Connect only ever extends a running sandbox.
		end := now.Add(timeout)
		if maxEnd := sb.startedAt.Add(s.maxLifetime); end.After(maxEnd) {
			end = maxEnd
		}
		if end.After(sb.endAt) {
			sb.endAt = end
		}
		writeJSON(w, http.StatusOK, s.sandboxResponse(sb))
		return
	}
	if s.running(t.id) >= s.maxRunning {
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf(
			"you have reached the maximum number of concurrent E2B sandboxes (%d)", s.maxRunning), "")
		return
	}
	sb.state, sb.startedAt, sb.endAt, sb.alias = "running", now, now.Add(timeout), sb.template.alias
	writeJSON(w, http.StatusCreated, s.sandboxResponse(sb))
}

func (s *Server) handleSnapshotCreate(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name string `json:"name"`
	}
	if !decodeBody(w, r, &in, true) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.team(r)
	sb, id, ok := s.findSandbox(w, r, t)
	if !ok {
		return
	}
	if sb.state != "running" {
		writeError(w, http.StatusConflict, fmt.Sprintf("Sandbox %q is not running", id), "")
		return
	}
	name, _, _ := strings.Cut(in.Name, ":")
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	sn := &snapshot{templateID: stableID(20, "snapshot", sb.id, fmt.Sprint(len(t.snapshots))), name: name,
		sandboxID: sb.id, createdAt: s.now(), base: sb.template}
	t.snapshots = append(t.snapshots, sn)
	writeJSON(w, http.StatusCreated, map[string]any{"snapshotID": sn.snapshotID(t), "names": sn.names(t)})
}

// handleList is GET /v2/sandboxes.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if len(q["state"]) > 1 {
		writeError(w, http.StatusBadRequest, `parameter "state" in query has an error: multiple values are not allowed; send state=running,paused`, "")
		return
	}
	states := map[string]bool{"running": true, "paused": true}
	if v := q.Get("state"); v != "" {
		states = map[string]bool{}
		for _, st := range strings.Split(v, ",") {
			if st != "running" && st != "paused" {
				writeError(w, http.StatusBadRequest, fmt.Sprintf(`parameter "state" in query has an error: value is not one of the allowed values ["running","paused"]: %q`, st), "")
				return
			}
			states[st] = true
		}
	}
	meta, ok := parseMetadata(q.Get("metadata"))
	if !ok {
		writeError(w, http.StatusBadRequest, "Error parsing metadata", "") // infra handlers/sandboxes_list.go (v2)
		return
	}
	var after time.Time
	if v := q.Get("startedAfter"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, `parameter "startedAfter" in query has an error: not a valid date-time`, "")
			return
		}
		after = t.Truncate(time.Microsecond)
	}
	tmpl := q.Get("template")
	if strings.Contains(tmpl, ":") {
		writeError(w, http.StatusBadRequest, "template filter must not contain a tag", "")
		return
	}
	order := q.Get("order")
	if order == "" {
		order = "desc"
	}
	if order != "asc" && order != "desc" {
		writeError(w, http.StatusBadRequest, `parameter "order" in query has an error: value is not one of the allowed values ["asc","desc"]`, "")
		return
	}
	limit, ok := parseLimit(w, q.Get("limit"), 100)
	if !ok {
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.team(r)
	var match []*sandbox
	totalRunning := 0
	for _, sb := range s.sandboxes {
		if sb.team != t.id || sb.startedAt.Before(after) || !metaMatches(sb.metadata, meta) ||
			(tmpl != "" && !sb.template.matches(tmpl)) {
			continue
		}
		if sb.state == "running" {
			totalRunning++
		}
		if states[sb.state] {
			match = append(match, sb)
		}
	}
	sort.Slice(match, func(i, j int) bool {
		a, b := match[i], match[j]
		if !a.startedAt.Equal(b.startedAt) {
			return a.startedAt.After(b.startedAt) == (order == "desc")
		}
		return (a.id > b.id) == (order == "desc")
	})
	start := 0
	if tok := q.Get("nextToken"); tok != "" {
		at, id, ok := parseSandboxToken(tok, order)
		if !ok {
			writeError(w, http.StatusBadRequest, "Invalid next token", "")
			return
		}
		start = sort.Search(len(match), func(i int) bool { return sandboxAfter(match[i], at, id, order) })
	}
	end := min(start+limit, len(match))
	page := match[start:end]
	if end < len(match) {
		last := page[len(page)-1]
		w.Header().Set("X-Next-Token", sandboxToken(last.startedAt, last.id, order))
	}
	if states["running"] {
		w.Header().Set("X-Total-Running", fmt.Sprint(totalRunning))
	}
	out := make([]listedSandbox, 0, len(page))
	for _, sb := range page {
		out = append(out, listed(sb))
	}
	writeJSON(w, http.StatusOK, out)
}

// metaMatches reports whether every wanted pair is in have; sandboxes
// without metadata never match a filter.
func metaMatches(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
