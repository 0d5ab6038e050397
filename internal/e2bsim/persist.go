package e2bsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// stateVersion is the format of SaveState's output; LoadState refuses any
// other.
const stateVersion = 1

// stateFile is what SaveState writes: everything a request can change.
// Teams are keyed by their id, which is derived from the API key, so the file
// holds no key. It does hold what callers sent as network secrets (rule
// header values, proxy credentials): save it where only its owner can read.
type stateFile struct {
	Version      int                  `json:"version"`
	SavedAt      time.Time            `json:"saved_at"`
	Sandboxes    []sandboxState       `json:"sandboxes"`
	Teams        map[string]teamState `json:"teams"`
	PublicSpawns map[string]spawns    `json:"public_spawns,omitempty"`
}

type sandboxState struct {
	ID              string            `json:"id"`
	Team            string            `json:"team"`
	TemplateID      string            `json:"template_id"`
	Alias           string            `json:"alias,omitempty"`
	State           string            `json:"state"`
	CreatedAt       time.Time         `json:"created_at"`
	StartedAt       time.Time         `json:"started_at"`
	EndAt           time.Time         `json:"end_at"`
	PausedAt        time.Time         `json:"paused_at,omitzero"`
	Until           time.Time         `json:"until,omitzero"`
	EndedAt         time.Time         `json:"ended_at,omitzero"`
	MemoryKept      bool              `json:"memory_kept,omitempty"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	CPU             int32             `json:"cpu"`
	MemMB           int32             `json:"mem_mb"`
	DiskMB          int32             `json:"disk_mb"`
	Envd            string            `json:"envd"`
	AutoPause       bool              `json:"auto_pause,omitempty"`
	AutoPauseMemory bool              `json:"auto_pause_memory,omitempty"`
	AutoResume      bool              `json:"auto_resume,omitempty"`
	Secure          bool              `json:"secure,omitempty"`
	AllowInternet   *bool             `json:"allow_internet,omitempty"`
	Network         *networkConfig    `json:"network,omitempty"`
}

type teamState struct {
	Blocked   bool              `json:"blocked,omitempty"`
	Snapshots []snapshotState   `json:"snapshots,omitempty"`
	Spawns    map[string]spawns `json:"spawns,omitempty"`
}

type snapshotState struct {
	TemplateID     string    `json:"template_id"`
	Name           string    `json:"name,omitempty"`
	Tag            string    `json:"tag"`
	SandboxID      string    `json:"sandbox_id"`
	CreatedAt      time.Time `json:"created_at"`
	BaseTemplateID string    `json:"base_template_id"`
}

type spawns struct {
	Count int64      `json:"count"`
	Last  *time.Time `json:"last,omitempty"`
}

// Changed reports whether the state changed since it was last saved or
// loaded, so that a caller saving on a timer writes only when needed.
func (s *Server) Changed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dirty
}

// SaveState writes the simulator's sandboxes (live and ended ones still in
// retention), snapshots, blocked teams and spawn counts as JSON.
func (s *Server) SaveState(w io.Writer) error {
	s.mu.Lock()
	f := stateFile{Version: stateVersion, SavedAt: s.now().UTC(), Teams: map[string]teamState{}, PublicSpawns: map[string]spawns{}}
	for _, set := range []map[string]*sandbox{s.sandboxes, s.ended} {
		for _, sb := range set {
			f.Sandboxes = append(f.Sandboxes, sandboxState{ID: sb.id, Team: sb.team, TemplateID: sb.template.id, Alias: sb.alias,
				State: sb.state, CreatedAt: sb.createdAt, StartedAt: sb.startedAt, EndAt: sb.endAt, PausedAt: sb.pausedAt,
				Until: sb.until, EndedAt: sb.endedAt, MemoryKept: sb.memoryKept, Metadata: sb.metadata, CPU: sb.cpu,
				MemMB: sb.memMB, DiskMB: sb.diskMB, Envd: sb.envd, AutoPause: sb.autoPause, AutoPauseMemory: sb.autoPauseMemory,
				AutoResume: sb.autoResume, Secure: sb.secure, AllowInternet: sb.allowInternet, Network: sb.network})
		}
	}
	for id, t := range s.byID {
		ts := teamState{Blocked: t.blocked, Spawns: map[string]spawns{}}
		for _, sn := range t.snapshots {
			ts.Snapshots = append(ts.Snapshots, snapshotState{TemplateID: sn.templateID, Name: sn.name, Tag: sn.tag,
				SandboxID: sn.sandboxID, CreatedAt: sn.createdAt, BaseTemplateID: sn.base.id})
		}
		for _, tp := range t.templates {
			if tp.spawnCount > 0 {
				ts.Spawns[tp.id] = spawns{Count: tp.spawnCount, Last: tp.lastSpawnedAt}
			}
		}
		if ts.Blocked || len(ts.Snapshots) > 0 || len(ts.Spawns) > 0 {
			f.Teams[id] = ts
		}
	}
	for _, tp := range s.public {
		if tp.spawnCount > 0 {
			f.PublicSpawns[tp.id] = spawns{Count: tp.spawnCount, Last: tp.lastSpawnedAt}
		}
	}
	s.dirty = false
	s.mu.Unlock()

	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(f)
}

// LoadState replaces the simulator's sandboxes, snapshots and counters with
// those SaveState wrote. A file that does not parse or refers to something
// the simulator does not know is an error, and the state is left unchanged.
func (s *Server) LoadState(r io.Reader) error {
	var f stateFile
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("not a state file: %w", err)
	}
	if f.Version != stateVersion {
		return fmt.Errorf("state file version %d, want %d", f.Version, stateVersion)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	teams := map[string]*team{}
	teamOf := func(id string) (*team, error) {
		if t := teams[id]; t != nil {
			return t, nil
		}
		if len(id) < 8 {
			return nil, fmt.Errorf("bad team id %q", id)
		}
		t := s.newTeam(id)
		if known := s.byID[id]; known != nil {
			t.namespace = known.namespace
		} else if !s.openTeams {
			return nil, fmt.Errorf("team %s is not one of the --team-key teams", id)
		}
		teams[id] = t
		return t, nil
	}
	findTemplate := func(t *team, id string) (*template, error) {
		for _, tp := range append(append([]*template{}, s.public...), t.templates...) {
			if tp.id == id {
				return tp, nil
			}
		}
		return nil, fmt.Errorf("unknown template %q", id)
	}
	for id, ts := range f.Teams {
		t, err := teamOf(id)
		if err != nil {
			return err
		}
		t.blocked = ts.Blocked
		for _, sn := range ts.Snapshots {
			base, err := findTemplate(t, sn.BaseTemplateID)
			if err != nil {
				return fmt.Errorf("snapshot %s: %w", sn.TemplateID, err)
			}
			t.snapshots = append(t.snapshots, &snapshot{templateID: sn.TemplateID, name: sn.Name, tag: sn.Tag,
				sandboxID: sn.SandboxID, createdAt: sn.CreatedAt, base: base})
		}
		for tid, sp := range ts.Spawns {
			found := false
			for _, tp := range t.templates { // the team's fresh copies: safe to change before the swap
				if tp.id == tid {
					tp.spawnCount, tp.lastSpawnedAt, found = sp.Count, sp.Last, true
				}
			}
			if !found {
				return fmt.Errorf("team %s: unknown template %q", id, tid)
			}
		}
	}
	sandboxes, ended := map[string]*sandbox{}, map[string]*sandbox{}
	for _, st := range f.Sandboxes {
		t, err := teamOf(st.Team)
		if err != nil {
			return err
		}
		tp, err := findTemplate(t, st.TemplateID)
		if err != nil {
			return fmt.Errorf("sandbox %s: %w", st.ID, err)
		}
		switch st.State {
		case stateRunning, statePausing, statePaused, stateKilling:
		default:
			return fmt.Errorf("sandbox %s: unknown state %q", st.ID, st.State)
		}
		if !sandboxIDShape.MatchString(st.ID) {
			return fmt.Errorf("sandbox %q: not a sandbox id", st.ID)
		}
		sb := &sandbox{id: st.ID, team: st.Team, template: tp, alias: st.Alias, state: st.State, createdAt: st.CreatedAt,
			startedAt: st.StartedAt, endAt: st.EndAt, pausedAt: st.PausedAt, until: st.Until, endedAt: st.EndedAt,
			memoryKept: st.MemoryKept, metadata: st.Metadata, cpu: st.CPU, memMB: st.MemMB, diskMB: st.DiskMB, envd: st.Envd,
			autoPause: st.AutoPause, autoPauseMemory: st.AutoPauseMemory, autoResume: st.AutoResume, secure: st.Secure,
			allowInternet: st.AllowInternet, network: st.Network}
		if sb.endedAt.IsZero() {
			sandboxes[sb.id] = sb
		} else {
			ended[sb.id] = sb
		}
	}
	public := map[string]*template{}
	for _, tp := range s.public {
		public[tp.id] = tp
	}
	for id := range f.PublicSpawns {
		if public[id] == nil {
			return errors.New("unknown public template " + id)
		}
	}

	// Everything parsed: swap it in. Teams keep their API keys' entries.
	for id, t := range teams {
		if known := s.byID[id]; known != nil {
			*known = *t
		} else {
			s.byID[id] = t
		}
	}
	for id, sp := range f.PublicSpawns {
		public[id].spawnCount, public[id].lastSpawnedAt = sp.Count, sp.Last
	}
	s.sandboxes, s.ended = sandboxes, ended
	for _, sb := range sandboxes {
		s.recordSecrets(sb.network)
	}
	s.dirty = false
	return nil
}

// recordSecrets notes the secrets a network config carries; callers hold
// s.mu.
func (s *Server) recordSecrets(n *networkConfig) {
	if n == nil {
		return
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
}
