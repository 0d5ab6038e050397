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

// The wire types here are the simulator's own reading of E2B's server, not
// the connector's (connectors/e2b/types.go): sharing one would make the
// contract test compare a type with itself.

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
	clientID = "6532622b"
	maxBody  = 1 << 20
	// minSecureEnvd is the oldest envd that supports secured access (infra
	// handlers/sandbox_create.go, minEnvdVersionForSecureFlag).
	minSecureEnvd = "0.2.0"
)

// sandboxIDShape is what E2B accepts as a sandbox id (infra
// packages/shared/pkg/id/id.go, ValidateSandboxID): lowercase letters and
// digits, any length. An id of that shape that names no sandbox is 404.
var sandboxIDShape = regexp.MustCompile(`^[a-z0-9]+$`)

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

// findSandbox validates the path id and returns the team's sandbox in any
// state (handlers decide what a pausing or killing one answers), writing 400
// or 404 itself; callers hold s.mu.
func (s *Server) findSandbox(w http.ResponseWriter, r *http.Request, t *team) (*sandbox, string, bool) {
	id, ok := parseSandboxID(w, r.PathValue("sandboxID"))
	if !ok {
		return nil, "", false
	}
	sb := s.sandboxes[id]
	if sb == nil || sb.team != t.id {
		notFound(w, id)
		return nil, id, false
	}
	return sb, id, true
}

// parseSandboxID reads a sandbox ID as E2B does (infra
// packages/api/internal/utils/split.go, ShortID): one "-<clientID>" suffix,
// which SDKs may append, is dropped; more than one dash, or an id that is
// not lowercase letters and digits, is 400 (written here). Any other id is
// looked up, and one that names no sandbox is 404, whatever its length.
func parseSandboxID(w http.ResponseWriter, raw string) (string, bool) {
	parts := strings.Split(raw, "-")
	if len(parts) > 2 || !sandboxIDShape.MatchString(parts[0]) {
		writeError(w, http.StatusBadRequest, "Invalid sandbox ID", "")
		return "", false
	}
	return parts[0], true
}

// withSandbox runs fn on the request's sandbox of the caller's team, under
// s.mu; when there is no such sandbox, findSandbox has answered.
func (s *Server) withSandbox(w http.ResponseWriter, r *http.Request, fn func(sb *sandbox, id string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb, id, ok := s.findSandbox(w, r, s.team(r)); ok {
		fn(sb, id)
	}
}

// notFound is E2B's 404 for a sandbox (infra utils/messages.go).
func notFound(w http.ResponseWriter, id string) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("Sandbox %q doesn't exist or you don't have access to it", id), "")
}

// changingState is E2B's 409 for a sandbox in a transitional state (infra
// utils/messages.go, SandboxChangingStateMsg).
func changingState(w http.ResponseWriter, id, state string) {
	msg := fmt.Sprintf("Sandbox %q is being paused", id)
	if state == stateKilling {
		msg = fmt.Sprintf("Sandbox %q is being killed", id)
	}
	writeError(w, http.StatusConflict, msg, "")
}

// envdAtLeast compares dotted envd versions numerically.
func envdAtLeast(v, min string) bool {
	a, b := strings.Split(v, "."), strings.Split(min, ".")
	for i := range b {
		var x, y int
		if i < len(a) {
			fmt.Sscan(a[i], &x)
		}
		fmt.Sscan(b[i], &y)
		if x != y {
			return x > y
		}
	}
	return true
}

// resolveTemplate finds a template reference (ID, alias or namespace/alias,
// optionally :tag; or a snapshot ID) and its build. It returns the HTTP
// status to answer when it cannot, as infra handlers/sandbox_create.go with
// cache/templates/errors.go does: a template the team can neither own nor see
// as public is 404 "not found" (never 403, so its existence is not revealed),
// and one without a build on the tag is 404 "tag ... does not exist" (not
// 400). The OpenAPI file lists no 404 for create at all; the code wins.
// Callers hold s.mu.
func (s *Server) resolveTemplate(t *team, ref string) (*template, *build, int, string) {
	name, tag, hasTag := strings.Cut(ref, ":")
	if !hasTag || strings.EqualFold(tag, "default") {
		tag = "default"
	}
	for _, sn := range t.snapshots {
		if (sn.templateID == name || (sn.name != "" && (sn.name == name || t.namespace+"/"+sn.name == name))) && sn.tag == tag {
			return sn.base, sn.base.readyBuild(), 0, ""
		}
	}
	for _, tp := range append(append([]*template{}, t.templates...), s.public...) {
		if !tp.matches(name) {
			continue
		}
		b := tp.tagBuild(strings.ToLower(tag))
		if b == nil {
			// The matched identifier is namespace/alias for an alias lookup.
			ident := name
			if tp.alias != "" && !tp.public && !strings.Contains(name, "/") && name != tp.id {
				ident = tp.namespace + "/" + tp.alias
			}
			return nil, nil, http.StatusNotFound, fmt.Sprintf("tag '%s' does not exist for template '%s'", tag, ident)
		}
		return tp, b, 0, ""
	}
	return nil, nil, http.StatusNotFound, fmt.Sprintf("template '%s' not found", name)
}

// handleCreate is POST /sandboxes (infra handlers/sandbox_create.go), which
// E2B still serves but marks deprecated: secure only when asked, a 15 s
// default timeout.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	var in newSandbox
	if !decodeBody(w, r, &in, true) {
		return
	}
	s.create(w, r, &in, 15)
}

// handleCreateV2 is POST /v2/sandboxes, the route the JS SDK (e2b 2.51.0,
// dist/index.d.ts "NewSandboxV2") and the current infra server use: the
// same create, always secured (the body has no secure field) and with a
// 300 s default timeout (infra sandbox.SandboxTimeoutDefaultV2, asserted by
// its TestConnectSandboxV2Schema_HasNoRequiredFields).
func (s *Server) handleCreateV2(w http.ResponseWriter, r *http.Request) {
	var in newSandbox
	if !decodeBody(w, r, &in, true) {
		return
	}
	in.Secure = true
	s.create(w, r, &in, 300)
}

// create starts a sandbox from in, defaultTimeout seconds long unless in
// says otherwise.
func (s *Server) create(w http.ResponseWriter, r *http.Request, in *newSandbox, defaultTimeout int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.team(r)
	now := s.now()
	if msg := s.validateNew(in); msg != "" {
		writeError(w, http.StatusBadRequest, msg, "")
		return
	}
	tp, b, status, msg := s.resolveTemplate(t, *in.TemplateID)
	if tp == nil {
		writeError(w, status, msg, "")
		return
	}
	if in.Secure && !envdAtLeast(b.envd, minSecureEnvd) {
		writeError(w, http.StatusBadRequest, "Template is not compatible with secured access. Please visit https://e2b.dev/docs/sandbox/secured-access for more information.", "")
		return
	}
	if s.running(t.id) >= s.maxRunning {
		s.tooMany(w)
		return
	}
	timeout := defaultTimeout
	if in.Timeout != nil {
		timeout = *in.Timeout
	}
	sb := &sandbox{
		id: s.newSandboxID(), team: t.id, template: tp, alias: tp.alias,
		state: "running", createdAt: now, startedAt: now, endAt: now.Add(time.Duration(timeout) * time.Second),
		metadata: in.Metadata, cpu: b.cpu, memMB: b.memMB, diskMB: b.diskMB, envd: b.envd,
		autoPause: in.AutoPause != nil && *in.AutoPause, autoPauseMemory: in.AutoPauseMemory == nil || *in.AutoPauseMemory,
		autoResume: in.AutoResume != nil && in.AutoResume.Enabled, secure: in.Secure,
		allowInternet: in.AllowInternetAccess, network: in.Network,
	}
	s.sandboxes[sb.id] = sb
	s.dirty = true
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
	// infra handlers/sandbox_create.go: only a filesystem-only auto-pause
	// (autoPauseMemory: false) needs autoPause; true is the default and
	// accepted with or without it.
	case in.AutoPauseMemory != nil && !*in.AutoPauseMemory && (in.AutoPause == nil || !*in.AutoPause):
		return "autoPauseMemory=false only applies when autoPause is true."
	case in.AutoPauseMemory != nil && !*in.AutoPauseMemory && in.AutoResume != nil && in.AutoResume.Enabled:
		return "autoPauseMemory=false (filesystem-only auto-pause) cannot be combined with autoResume: a filesystem-only " +
			"snapshot cannot be auto-resumed by traffic and must be resumed explicitly."
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
	s.recordSecrets(n)
	return ""
}

// newSandboxID returns an unused sandbox id: "i" and 20 characters. The seed
// repeats across restarts, so ids restored from a state file are skipped.
// Callers hold s.mu.
func (s *Server) newSandboxID() string {
	for {
		id := "i" + s.randString(20, "abcdefghijklmnopqrstuvwxyz0123456789")
		if s.sandboxes[id] == nil && s.ended[id] == nil {
			return id
		}
	}
}

// tooMany is the concurrency limit's 429 (infra orchestrator/create_instance.go).
func (s *Server) tooMany(w http.ResponseWriter) {
	writeError(w, http.StatusTooManyRequests, fmt.Sprintf("you have reached the maximum number of concurrent E2B sandboxes (%d). "+
		"If you need more, please visit 'https://e2b.dev/docs/billing'", s.maxRunning), "")
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
	out := sandboxResponse{TemplateID: sb.template.id, SandboxID: sb.id, ClientID: clientID, EnvdVersion: sb.envd, Alias: sb.alias}
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

// listed renders a sandbox. A paused one keeps its alias: E2B reads it from
// the snapshot's template aliases (infra handlers/sandboxes_list.go,
// snapshotsToPaginatedSandboxes; sandbox_get.go).
func listed(sb *sandbox) listedSandbox {
	return listedSandbox{TemplateID: sb.template.id, Alias: sb.alias, SandboxID: sb.id, ClientID: clientID,
		StartedAt: sb.startedAt, EndAt: sb.endAt, CPUCount: sb.cpu, MemoryMB: sb.memMB, DiskSizeMB: sb.diskMB,
		Metadata: sb.metadata, State: sb.apiState(), EnvdVersion: sb.envd}
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	s.withSandbox(w, r, func(sb *sandbox, id string) {
		if sb.state == stateKilling {
			notFound(w, id) // infra handlers/sandbox_get.go: a sandbox being killed is gone for the user
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
	})
}

// handleKill is DELETE /sandboxes/{id} (infra handlers/sandbox_kill.go):
// it kills a running sandbox and deletes a paused one's snapshot; a sandbox
// already being killed answers 204 again, one being paused is waited for and
// then deleted.
func (s *Server) handleKill(w http.ResponseWriter, r *http.Request) {
	s.withSandbox(w, r, func(sb *sandbox, _ string) {
		if sb.state == statePausing {
			sb.state = statePaused
		}
		if sb.state != stateKilling {
			s.kill(sb, s.now())
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// handleTimeout is POST /sandboxes/{id}/timeout. It follows infra
// handlers/sandbox_timeout.go and orchestrator/keep_alive.go (KeepAliveFor):
// only a sandbox in the orchestrator's store can be changed, so a paused one
// is 404 like an unknown one (the OpenAPI file lists no 409 here; the code
// answers 409 only while pausing or killing), and the end time is silently
// clamped to start + the plan's maximum.
func (s *Server) handleTimeout(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Timeout *int32 `json:"timeout"`
	}
	if !decodeBody(w, r, &in, true) || !timeoutGiven(w, in.Timeout) {
		return
	}
	s.withSandbox(w, r, func(sb *sandbox, id string) {
		switch sb.state {
		case statePaused:
			notFound(w, id)
			return
		case statePausing, stateKilling:
			changingState(w, id, sb.state)
			return
		}
		now := s.now()
		end, ok := s.keepAliveEnd(w, sb, now, time.Duration(*in.Timeout)*time.Second)
		if !ok {
			return
		}
		sb.endAt = end
		s.dirty = true
		s.sweep(now) // timeout 0 ends it now
		w.WriteHeader(http.StatusNoContent)
	})
}

// timeoutGiven answers 400 as E2B's validator does unless the body's
// timeout is present and not negative.
func timeoutGiven(w http.ResponseWriter, timeout *int32) bool {
	if timeout == nil || *timeout < 0 {
		writeError(w, http.StatusBadRequest, `request body has an error: doesn't match schema: Error at "/timeout": property "timeout" is missing or below 0`, "")
		return false
	}
	return true
}

// keepAliveEnd is a running sandbox's new end time, now + timeout, cut at
// the plan's maximum lifetime counted from its start (infra
// orchestrator/keep_alive.go); a sandbox already past that maximum is 400.
func (s *Server) keepAliveEnd(w http.ResponseWriter, sb *sandbox, now time.Time, timeout time.Duration) (time.Time, bool) {
	lived := now.Sub(sb.startedAt)
	if lived > s.maxLifetime {
		writeError(w, http.StatusBadRequest, "Max instance length exceeded", "")
		return time.Time{}, false
	}
	return now.Add(min(timeout, s.maxLifetime-lived)), true
}

// handlePause is POST /sandboxes/{id}/pause (infra handlers/sandbox_pause.go).
func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Memory *bool `json:"memory"`
	}
	if !decodeBody(w, r, &in, false) {
		return
	}
	s.withSandbox(w, r, func(sb *sandbox, id string) {
		switch sb.state {
		case stateKilling:
			notFound(w, id) // RemoveSandbox reports a killing sandbox as not found
			return
		case statePaused, statePausing: // pausing: E2B waits for it, then finds the snapshot
			writeError(w, http.StatusConflict, fmt.Sprintf("Error pausing sandbox - sandbox '%s' is already paused", id), "")
			return
		}
		s.pause(sb, s.now(), in.Memory == nil || *in.Memory)
		s.dirty = true
		w.WriteHeader(http.StatusNoContent)
	})
}

// connectBody is ConnectSandbox (v1: timeout required) and ConnectSandboxV2
// (the body and both fields optional).
type connectBody struct {
	Timeout *int32 `json:"timeout"`
	Memory  *bool  `json:"memory"`
}

// handleConnect is POST /sandboxes/{id}/connect (infra
// handlers/sandbox_connect.go), deprecated for the v2 route but served.
func (s *Server) handleConnect(w http.ResponseWriter, r *http.Request) {
	var in connectBody
	if !decodeBody(w, r, &in, true) || !timeoutGiven(w, in.Timeout) {
		return
	}
	s.connect(w, r, time.Duration(*in.Timeout)*time.Second, in.Memory)
}

// handleConnectV2 is POST /v2/sandboxes/{id}/connect, the JS SDK's route
// (e2b 2.51.0): the body is optional, an omitted timeout is 300 s, and a
// timeout below 1 is 400 (infra's TestConnectV2_Timeout in
// packages/api/internal/handlers).
func (s *Server) handleConnectV2(w http.ResponseWriter, r *http.Request) {
	var in connectBody
	if !decodeBody(w, r, &in, false) {
		return
	}
	timeout := int32(300)
	if in.Timeout != nil {
		if *in.Timeout < 1 {
			writeError(w, http.StatusBadRequest, `request body has an error: doesn't match schema: Error at "/timeout": number must be at least 1`, "")
			return
		}
		timeout = *in.Timeout
	}
	s.connect(w, r, time.Duration(timeout)*time.Second, in.Memory)
}

// connect follows infra handlers/sandbox_connect.go: a running sandbox is
// only ever extended (KeepAliveFor without allowShorter, clamped to the
// plan's maximum) and memory is not looked at; a pausing one is waited for
// and resumed like a paused one; a killing one is 409. memory is checked
// only when resuming (sandbox_resume.go, resolveFilesystemBoot): false on a
// snapshot that kept its memory needs a feature E2B does not enable by
// default (400), false on a filesystem-only snapshot is a plain resume.
func (s *Server) connect(w http.ResponseWriter, r *http.Request, timeout time.Duration, memory *bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.team(r)
	if timeout > s.maxLifetime {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("Timeout cannot be greater than %d hours", int(s.maxLifetime.Hours())), "")
		return
	}
	sb, id, ok := s.findSandbox(w, r, t)
	if !ok {
		return
	}
	now := s.now()
	switch sb.state {
	case stateKilling:
		changingState(w, id, sb.state)
		return
	case stateRunning:
		end, ok := s.keepAliveEnd(w, sb, now, timeout)
		if !ok {
			return
		}
		if end.After(sb.endAt) {
			sb.endAt = end
			s.dirty = true
		}
		writeJSON(w, http.StatusOK, s.sandboxResponse(sb))
		return
	}
	if memory != nil && !*memory && sb.memoryKept {
		writeError(w, http.StatusBadRequest, "Resuming without memory (memory: false) is not enabled for this team; "+
			"a plain resume still restores memory", "sandbox_memory_override_disabled")
		return
	}
	if s.running(t.id) >= s.maxRunning {
		s.tooMany(w)
		return
	}
	sb.state, sb.startedAt, sb.endAt, sb.alias = stateRunning, now, now.Add(timeout), sb.template.alias
	s.dirty = true
	writeJSON(w, http.StatusCreated, s.sandboxResponse(sb))
}

// handleSnapshotCreate is POST /sandboxes/{id}/snapshots (infra
// handlers/snapshot_template_create.go): a name's namespace must be the
// team's (400 otherwise), its tag defaults to "default", and only a sandbox
// in the orchestrator's store can be snapshotted (a paused one is 404).
func (s *Server) handleSnapshotCreate(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name *string `json:"name"`
	}
	if !decodeBody(w, r, &in, true) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.team(r)
	name, tag := "", "default"
	if in.Name != nil {
		var ok bool
		if name, tag, _, ok = splitSnapshotName(w, t, strings.TrimSpace(*in.Name)); !ok {
			return
		}
	}
	sb, id, ok := s.findSandbox(w, r, t)
	if !ok {
		return
	}
	switch sb.state {
	case statePaused:
		notFound(w, id)
		return
	case statePausing, stateKilling:
		writeError(w, http.StatusConflict, fmt.Sprintf("Sandbox '%s' cannot be snapshotted while in '%s' state", id, sb.state), "")
		return
	}
	sn := &snapshot{templateID: stableID(20, "snapshot", sb.id, fmt.Sprint(len(t.snapshots))), name: name, tag: tag,
		sandboxID: sb.id, createdAt: s.now(), base: sb.template}
	t.snapshots = append(t.snapshots, sn)
	s.dirty = true
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
		if sb.state == stateKilling {
			continue // infra handlers/sandboxes_list.go lists running and pausing ones only
		}
		if sb.state == stateRunning {
			totalRunning++
		}
		if states[sb.apiState()] {
			match = append(match, sb)
		}
	}
	// infra packages/api/internal/utils/sandboxes_list.go,
	// SortPaginatedSandboxes: by start time truncated to microseconds (the
	// keyset value), then by id ascending when newest first and descending
	// when oldest first (the exact reverse).
	sort.Slice(match, func(i, j int) bool {
		a, b := match[i], match[j]
		if at, bt := pageTime(a), pageTime(b); !at.Equal(bt) {
			return at.After(bt) == (order == "desc")
		}
		return (a.id < b.id) == (order == "desc")
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
