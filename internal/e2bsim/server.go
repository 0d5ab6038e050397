package e2bsim

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Options configures a Server. The zero value is a usable simulator.
type Options struct {
	// TeamKeys are the accepted API keys, each its own team. When empty, any
	// key of E2B's shape (^e2b_[0-9a-f]+$) is accepted as its own team.
	TeamKeys []string
	// MaxRunning is each team's limit of running sandboxes (default 20);
	// beyond it create and resume answer 429, without Retry-After as on E2B
	// (only E2B's rate limiter sends one).
	MaxRunning int
	// MaxLifetime is the longest a sandbox may run from its start (default
	// 24 h, E2B Pro's limit; HobbyMaxLifetime is the Hobby plan's). Create
	// and connect refuse a longer timeout, and set-timeout and connect
	// silently clamp the end time to start + MaxLifetime.
	MaxLifetime time.Duration
	// TransitionDelay is how long a sandbox stays pausing or killing before
	// it is paused or gone (default 0: at once). During it, E2B's answers for
	// those states apply: 409 on set-timeout, a pausing sandbox listed as
	// paused, a killing one not found.
	TransitionDelay time.Duration
	// Latency is added to every response.
	Latency time.Duration
	// FailRate is the share of requests answered 503, from 0 to 1.
	FailRate float64
	// Seed makes ids, tokens and failures reproducible.
	Seed uint64
	// Now is the clock (default time.Now). Expiry follows it.
	Now func() time.Time
}

// Plan lifetimes: E2B's max instance length per plan (team limits
// MaxLengthHours, infra handlers/timeout_helper.go).
const (
	HobbyMaxLifetime = time.Hour
	ProMaxLifetime   = 24 * time.Hour
)

// retryAfterSeconds is the Retry-After an injected 429 fault sends, standing
// in for E2B's rate limiter.
const retryAfterSeconds = 30

// SimulatorHeader is sent on every response, with SimulatorHeaderValue, so a
// client can tell it is talking to the simulator (real E2B never sends it).
const (
	SimulatorHeader      = "X-E2B-Simulator"
	SimulatorHeaderValue = "mcpgate-e2bsim"
)

var keyShape = regexp.MustCompile(`^e2b_[0-9a-f]+$`)

// Server is the simulator. It implements http.Handler and is safe for
// concurrent use.
type Server struct {
	mux         *http.ServeMux
	now         func() time.Time
	maxRunning  int
	maxLifetime time.Duration
	transition  time.Duration
	openTeams   bool

	mu        sync.Mutex
	rng       *rand.Rand
	latency   time.Duration
	failRate  float64
	faults    []*fault
	teams     map[string]*team // by API key
	byID      map[string]*team // by team id, including teams restored from a state file
	sandboxes map[string]*sandbox
	ended     map[string]*sandbox // killed or expired, kept for their logs and metrics
	public    []*template
	secrets   map[string]bool
	dirty     bool // state changed since the last SaveState
}

// New returns a simulator with opts.
func New(opts Options) *Server {
	s := &Server{
		now: opts.Now, maxRunning: opts.MaxRunning, maxLifetime: opts.MaxLifetime, transition: opts.TransitionDelay,
		openTeams: len(opts.TeamKeys) == 0,
		rng:       rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		latency:   opts.Latency, failRate: opts.FailRate,
		teams: map[string]*team{}, byID: map[string]*team{}, sandboxes: map[string]*sandbox{},
		ended: map[string]*sandbox{}, secrets: map[string]bool{},
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxRunning <= 0 {
		s.maxRunning = 20
	}
	if s.maxLifetime <= 0 {
		s.maxLifetime = 24 * time.Hour
	}
	s.public = publicTemplates(s.now())
	for _, k := range opts.TeamKeys {
		t := s.newTeam(teamID(k))
		s.teams[k], s.byID[t.id] = t, t
	}
	s.routes()
	return s
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /templates/defaults", s.handleDefaultTemplates)
	m.HandleFunc("GET /v2/templates", s.handleTemplates)
	m.HandleFunc("GET /templates/{templateID}", s.handleTemplate)
	// GET /templates/aliases/{alias} and GET /templates/{templateID}/tags
	// overlap (/templates/aliases/tags); the static segment wins, as in
	// infra's router.
	m.HandleFunc("GET /templates/{first}/{second}", func(w http.ResponseWriter, r *http.Request) {
		switch first, second := r.PathValue("first"), r.PathValue("second"); {
		case first == "aliases":
			s.handleAlias(w, r, second)
		case second == "tags":
			s.handleTags(w, r, first)
		default:
			http.NotFound(w, r)
		}
	})
	m.HandleFunc("POST /templates/tags", s.handleTagsAssign)
	m.HandleFunc("DELETE /templates/tags", s.handleTagsDelete)
	m.HandleFunc("POST /sandboxes", s.handleCreate)
	m.HandleFunc("POST /v2/sandboxes", s.handleCreateV2)
	m.HandleFunc("GET /v2/sandboxes", s.handleList)
	m.HandleFunc("GET /sandboxes/{sandboxID}", s.handleGet)
	m.HandleFunc("DELETE /sandboxes/{sandboxID}", s.handleKill)
	m.HandleFunc("GET /v2/sandboxes/{sandboxID}/logs", s.handleLogs)
	m.HandleFunc("GET /sandboxes/{sandboxID}/metrics", s.handleMetrics)
	m.HandleFunc("POST /sandboxes/{sandboxID}/timeout", s.handleTimeout)
	m.HandleFunc("POST /sandboxes/{sandboxID}/pause", s.handlePause)
	m.HandleFunc("POST /sandboxes/{sandboxID}/connect", s.handleConnect)
	m.HandleFunc("POST /v2/sandboxes/{sandboxID}/connect", s.handleConnectV2)
	m.HandleFunc("POST /sandboxes/{sandboxID}/snapshots", s.handleSnapshotCreate)
	m.HandleFunc("GET /snapshots", s.handleSnapshots)
	s.mux = m
}

// ServeHTTP implements http.Handler: latency, injected faults, the random
// failure rate and authentication come before the route.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(SimulatorHeader, SimulatorHeaderValue)
	s.mu.Lock()
	latency, f := s.latency, s.matchFault(r)
	fail := s.failRate > 0 && s.rng.Float64() < s.failRate
	s.mu.Unlock()

	if !sleep(r, latency) {
		return
	}
	if f != nil {
		f.serve(w, r)
		return
	}
	if fail {
		writeError(w, http.StatusServiceUnavailable, "Service unavailable, please retry", "sandbox_capacity_unavailable")
		return
	}
	key := r.Header.Get("X-API-Key")
	s.mu.Lock()
	t := s.teamFor(key)
	s.mu.Unlock()
	if t == nil {
		writeError(w, http.StatusUnauthorized, "Invalid API key", "")
		return
	}
	if t.blocked && !blockedAllowed(r) {
		writeError(w, http.StatusForbidden, "team is blocked", "")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// sleep waits d unless the request is cancelled first; it reports whether
// the request is still wanted.
func sleep(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// blockedAllowed reports whether a blocked team may still make the request.
// E2B's allowlist (infra packages/api/internal/middleware/blocked_team.go)
// keeps every read the simulator serves and DELETE of a sandbox, so a
// blocked team can still stop what it is billed for.
func blockedAllowed(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet:
		return true
	case http.MethodDelete:
		return strings.HasPrefix(r.URL.Path, "/sandboxes/") && strings.Count(r.URL.Path, "/") == 2
	}
	return false
}

// teamFor returns the team of an API key, creating it in open mode (or
// finding the one a state file restored). Callers hold s.mu.
func (s *Server) teamFor(key string) *team {
	if t, ok := s.teams[key]; ok {
		return t
	}
	if !s.openTeams || !keyShape.MatchString(key) {
		return nil
	}
	id := teamID(key)
	t := s.byID[id]
	if t == nil {
		t = s.newTeam(id)
		s.byID[id] = t
	}
	s.teams[key] = t
	return t
}

// team returns the request's team (authenticated by ServeHTTP) and sweeps
// expired sandboxes; callers hold s.mu.
func (s *Server) team(r *http.Request) *team {
	s.sweep(s.now())
	return s.teams[r.Header.Get("X-API-Key")]
}

// SetLatency changes the latency added to every response.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// SetFailRate changes the share of requests answered 503.
func (s *Server) SetFailRate(f float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failRate = f
}

// BlockTeam blocks or unblocks the team of key: a blocked team gets 403 on
// every mutating route, as on E2B.
func (s *Server) BlockTeam(key string, blocked bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.teamFor(key); t != nil {
		t.blocked, s.dirty = blocked, true
	}
}

// Secrets returns every secret value the simulator has issued or been given
// (access tokens, rule header values, proxy credentials), for tests that
// prove none of them leaks.
func (s *Server) Secrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.secrets))
	for v := range s.secrets {
		out = append(out, v)
	}
	return out
}

// secret records v as a secret and returns it; callers hold s.mu.
func (s *Server) secret(v string) string {
	if v != "" {
		s.secrets[v] = true
	}
	return v
}

// token returns a fresh random secret with a prefix; callers hold s.mu.
func (s *Server) token(prefix string) string {
	return s.secret(prefix + s.randString(32, "0123456789abcdef"))
}

func (s *Server) randString(n int, alphabet string) string {
	var b strings.Builder
	for range n {
		b.WriteByte(alphabet[s.rng.IntN(len(alphabet))])
	}
	return b.String()
}

// apiError is E2B's error body.
type apiError struct {
	Code      int    `json:"code"`
	Message   string `json:"message"`
	ErrorCode string `json:"error_code,omitempty"`
}

// writeError writes E2B's error body. A 429 from a handler is the
// concurrency limit, which carries no Retry-After on E2B (infra
// orchestrator/create_instance.go); only the rate limiter's does.
func writeError(w http.ResponseWriter, status int, message, errorCode string) {
	writeJSON(w, status, apiError{Code: status, Message: message, ErrorCode: errorCode})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may have gone; nothing to do
}
