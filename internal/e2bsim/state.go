package e2bsim

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"
)

// team is one API key's tenant.
type team struct {
	id        string
	namespace string
	blocked   bool
	templates []*template
	snapshots []*snapshot
}

// template is a sandbox template with its builds, newest first.
type template struct {
	id, alias, namespace string
	team                 string // owning team id; "" for E2B's public ones
	public               bool
	createdAt            time.Time
	spawnCount           int64
	lastSpawnedAt        *time.Time
	builds               []build
	tags                 []templateTag // assigned by POST /templates/tags; not persisted
}

type build struct {
	id, status         string
	createdAt, updated time.Time
	finished           *time.Time
	cpu, memMB, diskMB int32
	envd               string
}

// snapshot is a persistent snapshot template taken from a sandbox.
type snapshot struct {
	templateID string
	name       string // alias; "" when none was given
	tag        string // "default" unless the name carried another
	sandboxID  string
	createdAt  time.Time
	base       *template
}

// snapshotID is namespace/alias:tag, or templateID:tag without a name (infra
// handlers/snapshot_template_create.go, id.WithTag).
func (sn *snapshot) snapshotID(t *team) string {
	if sn.name == "" {
		return sn.templateID + ":" + sn.tag
	}
	return t.namespace + "/" + sn.name + ":" + sn.tag
}

// names are namespace/alias without a tag: the server builds them with
// id.WithNamespace only.
func (sn *snapshot) names(t *team) []string {
	if sn.name == "" {
		return []string{}
	}
	return []string{t.namespace + "/" + sn.name}
}

// zeroBuildID is what E2B reports for a template with no ready build.
const zeroBuildID = "00000000-0000-0000-0000-000000000000"

// readyBuild returns the newest ready build, or nil.
func (t *template) readyBuild() *build {
	for i := range t.builds {
		if t.builds[i].status == "ready" {
			return &t.builds[i]
		}
	}
	return nil
}

func (t *template) names() []string {
	if t.alias == "" {
		return []string{}
	}
	if t.namespace == "" {
		return []string{t.alias}
	}
	return []string{t.namespace + "/" + t.alias}
}

func (t *template) aliases() []string {
	if t.alias == "" {
		return []string{}
	}
	return []string{t.alias}
}

// matches reports whether ref (without a tag) names t: its ID, alias or
// namespace/alias.
func (t *template) matches(ref string) bool {
	return ref == t.id || (t.alias != "" && (ref == t.alias || ref == t.namespace+"/"+t.alias))
}

// hashN derives a stable number from parts, so generated data is the same on
// every run and independent of request order.
func hashN(parts ...string) uint64 {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return binary.BigEndian.Uint64(h.Sum(nil))
}

// stableID returns an id of n characters from [a-z0-9] derived from parts.
func stableID(n int, parts ...string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	x := hashN(parts...)
	for i := range b {
		if x == 0 {
			x = hashN(append(parts, fmt.Sprint(i))...)
		}
		b[i] = alphabet[x%36]
		x /= 36
	}
	return string(b)
}

func stableUUID(parts ...string) string {
	a, b := hashN(parts...), hashN(append(parts, "uuid")...)
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", a>>32, a>>16&0xffff, a&0xfff, b>>52&0xfff, b&0xffffffffffff)
}

func mkTemplate(teamID, ns, alias string, public bool, created time.Time, statuses ...string) *template {
	t := &template{id: stableID(20, "template", teamID, alias), alias: alias, namespace: ns, team: teamID,
		public: public, createdAt: created}
	// Builds newest first: statuses[0] is the latest.
	for i, st := range statuses {
		at := created.Add(time.Duration(len(statuses)-i) * time.Hour)
		b := build{id: stableUUID("build", t.id, fmt.Sprint(i)), status: st, createdAt: at, updated: at.Add(2 * time.Minute),
			cpu: 2, memMB: 512, diskMB: 5120, envd: "0.2.4"}
		if st == "ready" || st == "error" {
			f := at.Add(2 * time.Minute)
			b.finished = &f
		}
		t.builds = append(t.builds, b)
	}
	return t
}

// publicTemplates are E2B's default templates, owned by E2B's own team.
func publicTemplates(now time.Time) []*template {
	at := now.Add(-90 * 24 * time.Hour).Truncate(time.Second)
	return []*template{
		mkTemplate("e2b", "e2b", "base", true, at, "ready"),
		mkTemplate("e2b", "e2b", "code-interpreter-v1", true, at.Add(time.Hour), "ready"),
		mkTemplate("e2b", "e2b", "desktop", true, at.Add(2*time.Hour), "ready"),
	}
}

// teamID derives a team's id from its API key, so that a team's state can be
// saved and found again without storing the key.
func teamID(key string) string { return stableUUID("team", key) }

// newTeam builds a team with three templates of its own: one ready with
// three builds; one still building, whose ready build has an envd too old
// for secure; and one whose only build failed (so it reports E2B's zero
// values). Callers hold s.mu (or are New).
func (s *Server) newTeam(id string) *team {
	ns := "team-" + id[:8]
	at := s.now().Add(-30 * 24 * time.Hour).Truncate(time.Second)
	worker := mkTemplate(id, ns, "worker", false, at.Add(24*time.Hour), "building", "ready")
	for i := range worker.builds {
		// Built with an envd from before secured access (0.2.0): E2B refuses
		// secure: true for it.
		worker.builds[i].envd = "0.1.5"
	}
	return &team{id: id, namespace: ns, templates: []*template{
		mkTemplate(id, ns, "my-app", false, at, "ready", "ready", "error"),
		worker,
		mkTemplate(id, ns, "broken", false, at.Add(48*time.Hour), "error"),
	}}
}

// Sandbox states. pausing and killing are E2B's transitional states: they
// last Options.TransitionDelay (default: none, the change is immediate).
const (
	stateRunning = "running"
	statePausing = "pausing"
	statePaused  = "paused"
	stateKilling = "killing"
)

// sandbox is one sandbox's state.
type sandbox struct {
	id, team   string
	template   *template
	alias      string
	state      string // one of the state constants
	createdAt  time.Time
	startedAt  time.Time
	endAt      time.Time // expiry while running; the pause time while paused
	pausedAt   time.Time
	until      time.Time // end of a pausing or killing state
	endedAt    time.Time // when it was killed or expired, once it is gone
	memoryKept bool      // of the last pause
	metadata   map[string]string
	cpu        int32
	memMB      int32
	diskMB     int32
	envd       string

	autoPause, autoPauseMemory, autoResume bool
	secure                                 bool
	allowInternet                          *bool
	network                                *networkConfig
}

// apiState is the state E2B reports: a pausing sandbox already counts as
// paused (infra handlers/sandbox_get.go and sandboxes_list.go).
func (sb *sandbox) apiState() string {
	if sb.state == statePausing {
		return statePaused
	}
	return sb.state
}

// activeUntil is the last time the sandbox ran: now, its pause time, or the
// time it was killed.
func (sb *sandbox) activeUntil(now time.Time) time.Time {
	switch {
	case !sb.endedAt.IsZero():
		return sb.endedAt
	case sb.state == statePaused || sb.state == statePausing:
		return sb.pausedAt
	case sb.state == stateKilling:
		return sb.until
	}
	return now
}

// pause moves a running sandbox to pausing (or paused) at t.
func (s *Server) pause(sb *sandbox, t time.Time, memory bool) {
	sb.state, sb.pausedAt, sb.endAt, sb.memoryKept = statePaused, t, t, memory
	if s.transition > 0 {
		sb.state, sb.until = statePausing, t.Add(s.transition)
	}
}

// kill moves a sandbox to killing, or straight to the ended set when there
// is no transition or it was not running. Callers hold s.mu.
func (s *Server) kill(sb *sandbox, now time.Time) {
	if s.transition > 0 && sb.state == stateRunning {
		sb.state, sb.until = stateKilling, now.Add(s.transition)
		return
	}
	s.end(sb, now)
}

// end removes a sandbox for good. Its logs and metrics stay queryable for
// the retention period, as E2B keeps them after a sandbox ends. Callers hold
// s.mu.
func (s *Server) end(sb *sandbox, at time.Time) {
	if sb.state == stateRunning || sb.state == stateKilling {
		sb.endedAt = at
	} else {
		sb.endedAt = sb.pausedAt // a paused sandbox produced nothing since
	}
	delete(s.sandboxes, sb.id)
	s.ended[sb.id] = sb
	s.dirty = true
}

// sweep applies every change due at now: transitions finish, expired
// auto-pause sandboxes pause (at their end time), other expired ones end, and
// ended ones past the retention are forgotten. Callers hold s.mu.
func (s *Server) sweep(now time.Time) {
	for _, sb := range s.sandboxes {
		switch {
		case sb.state == statePausing && !now.Before(sb.until):
			sb.state = statePaused
		case sb.state == stateKilling && !now.Before(sb.until):
			s.end(sb, sb.until)
		case sb.state == stateRunning && !now.Before(sb.endAt):
			if sb.autoPause {
				s.pause(sb, sb.endAt, sb.autoPauseMemory)
				if sb.state == statePausing && !now.Before(sb.until) {
					sb.state = statePaused
				}
			} else {
				s.end(sb, sb.endAt)
			}
		default:
			continue
		}
		s.dirty = true
	}
	for id, sb := range s.ended {
		if now.Sub(sb.endedAt) > retention {
			delete(s.ended, id)
		}
	}
}

// running counts a team's running sandboxes; callers hold s.mu.
func (s *Server) running(teamID string) int {
	n := 0
	for _, sb := range s.sandboxes {
		if sb.team == teamID && sb.state == stateRunning {
			n++
		}
	}
	return n
}
