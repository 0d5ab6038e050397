package e2bsim

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// templateTag is a tag assigned to one of a template's builds. The
// "default" tag is not stored: it is the newest ready build.
type templateTag struct {
	name, buildID string
	at            time.Time
}

// tagBuild is the build a tag names, or nil.
func (t *template) tagBuild(tag string) *build {
	if tag == defaultTag {
		return t.readyBuild()
	}
	for _, tt := range t.tags {
		if tt.name != tag {
			continue
		}
		for i := range t.builds {
			if t.builds[i].id == tt.buildID {
				return &t.builds[i]
			}
		}
	}
	return nil
}

const defaultTag = "default"

// The shapes of infra packages/shared/pkg/id/id.go.
var (
	identifierShape = regexp.MustCompile(`^[a-z0-9-_]+$`)
	tagShape        = regexp.MustCompile(`^[a-z0-9-_.]+$`)
	uuidShape       = regexp.MustCompile(`^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$`)
)

// parseName reads "[namespace/]alias[:tag]" as infra id.ParseName does:
// trimmed and lowercased, each part checked; a "default" tag (any case) is
// no tag. hasTag says whether a tag was written at all.
func parseName(input string) (ident, tag string, hasTag bool, err error) {
	ident, tag, hasTag = strings.Cut(strings.TrimSpace(input), ":")
	if hasTag {
		if tag, err = cleanTag(tag); err != nil {
			return "", "", false, err
		}
	}
	ns, alias, found := strings.Cut(ident, "/")
	if !found {
		alias, ns = ns, ""
	}
	if found {
		if ns, err = clean(ns, "namespace", identifierShape); err != nil {
			return "", "", false, err
		}
	}
	if alias, err = clean(alias, "template ID", identifierShape); err != nil {
		return "", "", false, err
	}
	if found {
		return ns + "/" + alias, tag, hasTag, nil
	}
	return alias, tag, hasTag, nil
}

func clean(v, what string, shape *regexp.Regexp) (string, error) {
	c := strings.ToLower(strings.TrimSpace(v))
	if !shape.MatchString(c) {
		return "", fmt.Errorf("invalid %s: %s", what, v)
	}
	return c, nil
}

// cleanTag is infra id.validateTag: a tag may not look like a UUID.
func cleanTag(tag string) (string, error) {
	c, err := clean(tag, "tag", tagShape)
	if err == nil && uuidShape.MatchString(c) {
		err = fmt.Errorf("tag cannot be a UUID")
	}
	if err == nil && strings.EqualFold(c, defaultTag) {
		c = defaultTag
	}
	return c, err
}

// lookupAlias finds the template an identifier names among the team's and
// the public ones, after checking its namespace is the team's (400, written
// here with 404 for none: infra cache/templates/errors.go); callers hold
// s.mu.
func (s *Server) lookupAlias(w http.ResponseWriter, t *team, ident string) (*template, bool) {
	if ns, _, found := strings.Cut(ident, "/"); found && ns != t.namespace {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("namespace '%s' must match your team '%s'", ns, t.namespace), "")
		return nil, false
	}
	for _, tp := range append(append([]*template{}, t.templates...), s.public...) {
		if tp.matches(ident) {
			return tp, true
		}
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("template '%s' not found", ident), "")
	return nil, false
}

// ownTemplate is lookupAlias for a template the team must own: another
// team's (E2B's public ones included) is 403 with forbidden (written here).
// Callers hold s.mu.
func (s *Server) ownTemplate(w http.ResponseWriter, t *team, ident, forbidden string) (*template, bool) {
	tp, ok := s.lookupAlias(w, t, ident)
	if ok && tp.team != t.id {
		writeError(w, http.StatusForbidden, forbidden, "")
		return nil, false
	}
	return tp, ok
}

// handleAlias is GET /templates/aliases/{alias} (infra
// handlers/template_alias.go): the team's own alias answers 200 with its
// template; another team's, E2B's public ones included, 403 (checked before
// any tag, so a tag's existence is not revealed); an unknown one 404. The JS
// SDK's Template.exists reads 200 and 403 as "exists".
func (s *Server) handleAlias(w http.ResponseWriter, r *http.Request, alias string) {
	ident, tag, hasTag, err := parseName(alias)
	if err != nil {
		writeError(w, http.StatusBadRequest, "Invalid alias format: "+err.Error(), "")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tp, ok := s.ownTemplate(w, s.team(r), ident, "You don't have access to this template alias")
	if !ok {
		return
	}
	if hasTag && tp.tagBuild(tag) == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("tag '%s' does not exist for template '%s'", tag, ident), "")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"public": tp.public, "templateID": tp.id})
}

// handleTags is GET /templates/{templateID}/tags (infra
// handlers/template_tags.go, GetTemplatesTemplateIDTags): the team's own
// template's tags, "default" first; another team's is 403.
func (s *Server) handleTags(w http.ResponseWriter, r *http.Request, templateID string) {
	ident, _, _, err := parseName(templateID)
	if err != nil {
		writeError(w, http.StatusBadRequest, "Invalid template reference: "+err.Error(), "")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tp, ok := s.ownTemplate(w, s.team(r), ident, fmt.Sprintf("You don't have access to sandbox template '%s'", templateID))
	if !ok {
		return
	}
	type tagJSON struct {
		Tag       string    `json:"tag"`
		BuildID   string    `json:"buildID"`
		CreatedAt time.Time `json:"createdAt"`
	}
	out := []tagJSON{}
	if b := tp.readyBuild(); b != nil {
		out = append(out, tagJSON{Tag: defaultTag, BuildID: b.id, CreatedAt: b.createdAt})
	}
	for _, tt := range tp.tags {
		out = append(out, tagJSON{Tag: tt.name, BuildID: tt.buildID, CreatedAt: tt.at})
	}
	writeJSON(w, http.StatusOK, out)
}

// handleTagsAssign is POST /templates/tags (infra handlers/template_tags.go,
// PostTemplatesTags): tags the build that target ("alias[:tag]") names.
func (s *Server) handleTagsAssign(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Target *string  `json:"target"`
		Tags   []string `json:"tags"`
	}
	if !decodeBody(w, r, &in, true) {
		return
	}
	if in.Target == nil {
		writeError(w, http.StatusBadRequest, `Invalid request body: property "target" is missing`, "")
		return
	}
	if len(in.Tags) == 0 {
		writeError(w, http.StatusBadRequest, "At least one tag is required", "")
		return
	}
	ident, tag, _, err := parseName(*in.Target)
	if err != nil {
		writeError(w, http.StatusBadRequest, "Invalid target template format: "+err.Error(), "")
		return
	}
	if tag == "" {
		tag = defaultTag
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.team(r)
	tp, ok := s.lookupAlias(w, t, ident)
	if !ok {
		return
	}
	b := tp.tagBuild(tag)
	if b == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Template '%s' with tag '%s' not found", *in.Target, tag), "")
		return
	}
	if tp.team != t.id {
		writeError(w, http.StatusForbidden, fmt.Sprintf("You don't have access to sandbox template '%s'", ident), "")
		return
	}
	tags, ok := cleanTags(w, in.Tags)
	if !ok {
		return
	}
	now := s.now()
	for _, name := range tags {
		tp.tags = removeTag(tp.tags, name)
		if name != defaultTag {
			tp.tags = append(tp.tags, templateTag{name: name, buildID: b.id, at: now})
		}
	}
	writeJSON(w, http.StatusCreated, map[string]any{"tags": tags, "buildID": b.id})
}

// handleTagsDelete is DELETE /templates/tags (infra handlers/template_tags.go,
// DeleteTemplatesTags): "default" cannot be deleted, and the name carries no
// tag.
func (s *Server) handleTagsDelete(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name *string  `json:"name"`
		Tags []string `json:"tags"`
	}
	if !decodeBody(w, r, &in, true) {
		return
	}
	tags, ok := cleanTags(w, in.Tags)
	if !ok {
		return
	}
	switch {
	case len(tags) == 0:
		writeError(w, http.StatusBadRequest, "At least one tag is required", "")
		return
	case containsStr(tags, defaultTag):
		writeError(w, http.StatusBadRequest, "Cannot delete the 'default' tag", "")
		return
	case in.Name == nil:
		writeError(w, http.StatusBadRequest, `Invalid request body: property "name" is missing`, "")
		return
	}
	ident, _, hasTag, err := parseName(*in.Name)
	if err != nil {
		writeError(w, http.StatusBadRequest, "Invalid template name format: "+err.Error(), "")
		return
	}
	if hasTag {
		writeError(w, http.StatusBadRequest, "Template name should not contain a tag, use the 'tags' field instead", "")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tp, ok := s.ownTemplate(w, s.team(r), ident, fmt.Sprintf("You don't have access to sandbox template '%s'", ident))
	if !ok {
		return
	}
	for _, name := range tags {
		tp.tags = removeTag(tp.tags, name)
	}
	w.WriteHeader(http.StatusNoContent)
}

// cleanTags validates and de-duplicates tags (infra
// id.ValidateAndDeduplicateTags), writing the 400 itself.
func cleanTags(w http.ResponseWriter, tags []string) ([]string, bool) {
	var out []string
	for _, tag := range tags {
		c, err := cleanTag(tag)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid tag: invalid tag '%s': %v", tag, err), "")
			return nil, false
		}
		if !containsStr(out, c) {
			out = append(out, c)
		}
	}
	return out, true
}

func removeTag(tags []templateTag, name string) []templateTag {
	out := tags[:0]
	for _, tt := range tags {
		if tt.name != name {
			out = append(out, tt)
		}
	}
	return out
}
