package e2bsim

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
)

type templateJSON struct {
	TemplateID    string     `json:"templateID"`
	BuildID       string     `json:"buildID"`
	CPUCount      int32      `json:"cpuCount"`
	MemoryMB      int32      `json:"memoryMB"`
	DiskSizeMB    int32      `json:"diskSizeMB"`
	Public        bool       `json:"public"`
	Aliases       []string   `json:"aliases"`
	Names         []string   `json:"names"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
	CreatedBy     any        `json:"createdBy"`
	LastSpawnedAt *time.Time `json:"lastSpawnedAt"`
	SpawnCount    int64      `json:"spawnCount"`
	BuildCount    int32      `json:"buildCount"`
	EnvdVersion   string     `json:"envdVersion"`
	BuildStatus   string     `json:"buildStatus"`
}

type buildJSON struct {
	BuildID     string     `json:"buildID"`
	Status      string     `json:"status"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	FinishedAt  *time.Time `json:"finishedAt,omitempty"`
	CPUCount    int32      `json:"cpuCount"`
	MemoryMB    int32      `json:"memoryMB"`
	DiskSizeMB  int32      `json:"diskSizeMB"`
	EnvdVersion string     `json:"envdVersion"`
}

// templateOut renders E2B's Template, including its zero values when no
// build is ready (zero-UUID buildID, cpuCount and memoryMB 0, envdVersion "").
func templateOut(t *template) templateJSON {
	out := templateJSON{TemplateID: t.id, BuildID: zeroBuildID, Public: t.public, Aliases: t.aliases(), Names: t.names(),
		CreatedAt: t.createdAt, UpdatedAt: t.builds[0].updated, LastSpawnedAt: t.lastSpawnedAt, SpawnCount: t.spawnCount,
		BuildCount: int32(len(t.builds)), BuildStatus: t.builds[0].status}
	if b := t.readyBuild(); b != nil {
		out.BuildID, out.CPUCount, out.MemoryMB, out.DiskSizeMB, out.EnvdVersion = b.id, b.cpu, b.memMB, b.diskMB, b.envd
	}
	return out
}

func (s *Server) handleDefaultTemplates(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	type alias struct {
		Alias     string  `json:"alias"`
		Namespace *string `json:"namespace"`
	}
	var out []map[string]any
	for _, t := range s.public {
		b := t.readyBuild()
		ns := t.namespace
		out = append(out, map[string]any{
			"id": t.id, "aliases": []alias{{Alias: t.alias, Namespace: &ns}}, "buildId": b.id,
			"ramMb": b.memMB, "vcpu": b.cpu, "totalDiskSizeMb": b.diskMB, "envdVersion": b.envd,
			"createdAt": t.createdAt, "public": true, "buildCount": len(t.builds), "spawnCount": t.spawnCount,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"templates": out})
}

func (s *Server) handleTemplates(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.team(r)
	q := r.URL.Query()
	if id := q.Get("teamID"); id != "" && id != t.id {
		writeError(w, http.StatusBadRequest, "Team ID param mismatch with the API key", "") // infra handlers/templates_list_v2.go
		return
	}
	list := append([]*template{}, t.templates...)
	sort.Slice(list, func(i, j int) bool {
		if !list[i].createdAt.Equal(list[j].createdAt) {
			return list[i].createdAt.After(list[j].createdAt)
		}
		return list[i].id > list[j].id
	})
	start, end, ok := pageOf(w, q, len(list))
	if !ok {
		return
	}
	out := make([]templateJSON, 0, end-start)
	for _, tp := range list[start:end] {
		out = append(out, templateOut(tp))
	}
	writeJSON(w, http.StatusOK, out)
}

// handleTemplate is GET /templates/{templateID}: the team's own template
// with a page of its builds. Other teams' templates, public ones included,
// get 403.
func (s *Server) handleTemplate(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.team(r)
	id := r.PathValue("templateID")
	var tp *template
	for _, x := range t.templates {
		if x.id == id {
			tp = x
		}
	}
	if tp == nil {
		for _, x := range s.allTemplates() {
			if x.id == id {
				writeError(w, http.StatusForbidden, fmt.Sprintf("You don't have access to this sandbox template (%s)", id), "")
				return
			}
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("Template %s not found", id), "") // infra handlers/template_get.go
		return
	}
	start, end, ok := pageOf(w, r.URL.Query(), len(tp.builds))
	if !ok {
		return
	}
	builds := make([]buildJSON, 0, end-start)
	for _, b := range tp.builds[start:end] {
		builds = append(builds, buildJSON{BuildID: b.id, Status: b.status, CreatedAt: b.createdAt, UpdatedAt: b.updated,
			FinishedAt: b.finished, CPUCount: b.cpu, MemoryMB: b.memMB, DiskSizeMB: b.diskMB, EnvdVersion: b.envd})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"templateID": tp.id, "public": tp.public, "aliases": tp.aliases(), "names": tp.names(),
		"createdAt": tp.createdAt, "updatedAt": tp.builds[0].updated, "lastSpawnedAt": tp.lastSpawnedAt,
		"spawnCount": tp.spawnCount, "builds": builds,
	})
}

// splitSnapshotName reads a snapshot name, [namespace/]name[:tag], as infra
// handlers/snapshot_template_create.go and snapshot_template_list.go do: a
// namespace other than the team's is 400 (written here), and an empty or
// "default" tag (in any case) is "default". hasTag says whether the name
// carried a tag at all.
func splitSnapshotName(w http.ResponseWriter, t *team, full string) (name, tag string, hasTag, ok bool) {
	name, tag, hasTag = strings.Cut(full, ":")
	if tag == "" || strings.EqualFold(tag, "default") {
		tag = "default"
	}
	if ns, alias, found := strings.Cut(name, "/"); found {
		if ns != t.namespace {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("namespace '%s' must match your team '%s'", ns, t.namespace), "")
			return "", "", false, false
		}
		name = alias
	}
	return name, tag, hasTag, true
}

// allTemplates is every template of every team plus the public ones;
// callers hold s.mu.
func (s *Server) allTemplates() []*template {
	all := append([]*template{}, s.public...)
	for _, t := range s.teams {
		all = append(all, t.templates...)
	}
	return all
}

func (s *Server) handleSnapshots(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.team(r)
	q := r.URL.Query()
	sandboxID, name := q.Get("sandboxID"), q.Get("name")
	if sandboxID != "" {
		var ok bool
		if sandboxID, ok = parseSandboxID(w, sandboxID); !ok { // infra handlers/snapshot_template_list.go
			return
		}
	}
	type snapshotJSON struct {
		SnapshotID string   `json:"snapshotID"`
		Names      []string `json:"names"`
	}
	// A name filter as infra handlers/snapshot_template_list.go reads it: a
	// namespace other than the team's is 400 (not an empty list), a bare
	// name matches every tag, name:tag only that tag.
	var filterName, filterTag string
	if name != "" {
		ident, tag, hasTag, ok := splitSnapshotName(w, t, name)
		if !ok {
			return
		}
		filterName = ident
		if hasTag {
			filterTag = tag
		}
	}
	var list []snapshotJSON
	for i := len(t.snapshots) - 1; i >= 0; i-- { // newest first
		sn := t.snapshots[i]
		if sandboxID != "" && sn.sandboxID != sandboxID {
			continue
		}
		if name != "" && (filterName != sn.name && filterName != sn.templateID || filterTag != "" && filterTag != sn.tag) {
			continue
		}
		list = append(list, snapshotJSON{SnapshotID: sn.snapshotID(t), Names: sn.names(t)})
	}
	start, end, ok := pageOf(w, q, len(list))
	if !ok {
		return
	}
	out := list[start:end]
	if out == nil {
		out = []snapshotJSON{}
	}
	writeJSON(w, http.StatusOK, out)
}
