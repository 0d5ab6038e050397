package service

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

// How a discovery's catalog becomes the stored one, and how stored rows
// are shown: the rules of trust (what starts on, what is quarantined) live
// here, apart from the service's checks and writes.

// mergeReport is what a discovery changed, for the audit log.
type mergeReport struct {
	added, removed, changed, enabled []string
	quarantined                      []quarantine
}

type quarantine struct {
	tool   string
	change *mcpgate.ToolChange
}

func (r mergeReport) addTo(args map[string]any) {
	for k, v := range map[string][]string{"added": r.added, "removed": r.removed, "changed": r.changed} {
		if len(v) > 0 {
			args[k] = v
		}
	}
	if len(r.quarantined) > 0 {
		names := make([]string, len(r.quarantined))
		for i, q := range r.quarantined {
			names[i] = q.tool
		}
		args["quarantined"] = names
	}
}

// mergeCatalog applies a discovery to the stored tools. A new tool
// arrives off, unless it declares readOnlyHint true, when it is on
// (pinned) with no approval. A tool an admin trusted (pinned) whose
// definition changed is quarantined, the trusted definition kept in force
// beside the new one; one that changed back is released. An untrusted
// tool takes its new definition and keeps its settings: a hint that now
// claims less risk turns nothing on. A tool no longer listed is kept,
// with its pin, marked unlisted.
func mergeCatalog(old []store.UpstreamTool, found []upstream.Tool) ([]store.UpstreamTool, mergeReport, error) {
	var rep mergeReport
	byName := map[string]store.UpstreamTool{}
	for _, t := range old {
		byName[t.Name] = t
	}
	seen := map[string]bool{}
	out := make([]store.UpstreamTool, 0, len(found)+len(old))
	for _, f := range found {
		seen[f.Name] = true
		pin, err := upstream.Pin(f)
		if err != nil {
			return nil, rep, err
		}
		t, existed := byName[f.Name]
		switch {
		case !existed:
			t = store.UpstreamTool{Name: f.Name, Definition: f.Raw, Listed: true, Hints: hintsFrom(f.Annotations),
				Approval: defaultApproval(f.Annotations)}
			if f.Annotations.ReadOnly != nil && *f.Annotations.ReadOnly {
				t.Enabled, t.Pin = true, pin
				rep.enabled = append(rep.enabled, f.Name)
			}
			rep.added = append(rep.added, f.Name)
		case t.Pin != "" && t.Pin == pin:
			t.Definition, t.Pending, t.Quarantined, t.Hints = f.Raw, nil, false, hintsFrom(f.Annotations)
		case t.Pin != "":
			already := t.Quarantined && samePin(t.Pending, pin)
			t.Pending, t.Quarantined = f.Raw, true
			if !already {
				c, err := toolChange(t.Definition, f.Raw)
				if err != nil {
					return nil, rep, err
				}
				rep.quarantined = append(rep.quarantined, quarantine{tool: f.Name, change: c})
			}
		default:
			if !samePin(t.Definition, pin) {
				rep.changed = append(rep.changed, f.Name)
			}
			t.Definition, t.Pending, t.Quarantined, t.Hints = f.Raw, nil, false, hintsFrom(f.Annotations)
		}
		if !t.Listed && existed {
			rep.added = append(rep.added, f.Name)
		}
		t.Listed = true
		out = append(out, t)
	}
	for _, t := range old {
		if !seen[t.Name] {
			if t.Listed {
				rep.removed = append(rep.removed, t.Name)
			}
			t.Listed = false
			out = append(out, t)
		}
	}
	return out, rep, nil
}

// samePin reports whether a stored definition has the given pin.
func samePin(def json.RawMessage, pin string) bool {
	t, err := upstream.ParseTool(def)
	if err != nil {
		return false
	}
	p, err := upstream.Pin(t)
	return err == nil && p == pin
}

// defaultApproval is the approval mode a tool starts with: none for one
// that declares itself read-only, a person for one that may destroy (the
// spec's default when undeclared), the model's confirmation otherwise.
func defaultApproval(a upstream.Annotations) mcpgate.Approval {
	switch {
	case a.ReadOnly != nil && *a.ReadOnly:
		return mcpgate.ApprovalNone
	case a.DestructiveHint():
		return mcpgate.ApprovalHuman
	}
	return mcpgate.ApprovalModel
}

func hintsFrom(a upstream.Annotations) mcpgate.ToolHints {
	return mcpgate.ToolHints{ReadOnly: a.ReadOnly, Destructive: a.Destructive, Idempotent: a.Idempotent, OpenWorld: a.OpenWorld}
}

// toolChange is what a new definition changes against the trusted one.
func toolChange(trusted, next json.RawMessage) (*mcpgate.ToolChange, error) {
	a, err := upstream.ParseTool(trusted)
	if err != nil {
		return nil, err
	}
	b, err := upstream.ParseTool(next)
	if err != nil {
		return nil, err
	}
	d, err := upstream.DiffCatalogs([]upstream.Tool{a}, []upstream.Tool{b})
	if err != nil {
		return nil, err
	}
	pin, err := upstream.Pin(b)
	if err != nil {
		return nil, err
	}
	c := &mcpgate.ToolChange{Pin: pin, Fields: []string{}, Definition: b.Raw}
	for _, ch := range d.Changed {
		c.Fields = append(c.Fields, ch.Fields...)
	}
	for _, h := range d.Loosened {
		c.Loosened = append(c.Loosened, mcpgate.HintLoosened{Hint: h.Hint, Before: h.Before, After: h.After})
	}
	return c, nil
}

func loosenedNames(hs []mcpgate.HintLoosened) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Hint
	}
	return out
}

// setDiscovered records on srv what a discovery found besides the tools.
func setDiscovered(srv *store.UpstreamServer, cat *upstream.Catalog, at time.Time) {
	srv.Health, srv.LastError, srv.LastDiscoveredAt = mcpgate.HealthOK, "", &at
	srv.ProtocolVersion, srv.Init = cat.ProtocolVersion, cat.Init
	srv.Prompts, srv.Resources, srv.ResourceTemplates = rawList(cat.Prompts), rawList(cat.Resources), rawList(cat.ResourceTemplates)
}

func rawList(items []json.RawMessage) json.RawMessage {
	if items == nil {
		items = []json.RawMessage{}
	}
	b, _ := json.Marshal(items)
	return b
}

// hintsOf hints at each header's value: its last four characters, when it
// is long enough that they say little about the rest.
func hintsOf(h map[string]mcpgate.Secret) []mcpgate.HeaderHint {
	out := make([]mcpgate.HeaderHint, 0, len(h))
	for name, v := range h {
		val := v.Reveal()
		hint := "…"
		if len(val) >= 16 {
			hint += val[len(val)-4:]
		}
		out = append(out, mcpgate.HeaderHint{Name: name, Hint: hint})
	}
	slices.SortFunc(out, func(a, b mcpgate.HeaderHint) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func headerNames(h map[string]mcpgate.Secret) []string {
	names := make([]string, 0, len(h))
	for n := range h {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// auditURL is the URL without its query and fragment: a query may carry an
// API key, and the audit log keeps no credential.
func auditURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}

// maskedURL is the URL with each query value replaced (the names kept, so
// a member sees that there are some) and no user information or fragment.
func maskedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.User, u.Fragment = nil, ""
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			name, _, _ := strings.Cut(p, "=")
			parts[i] = name + "=redacted"
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	return u.String()
}

// serverView is a stored server as the API shows it, its tools counted
// and, with withTools, listed.
func serverView(row *store.UpstreamServer, tools []store.UpstreamTool, withTools bool) *mcpgate.Server {
	v := row.Server
	if v.Headers == nil {
		v.Headers = []mcpgate.HeaderHint{}
	}
	var init struct {
		ServerInfo mcpgate.ServerInfo `json:"serverInfo"`
	}
	if len(row.Init) > 0 && json.Unmarshal(row.Init, &init) == nil {
		v.ServerInfo = init.ServerInfo
	}
	for _, t := range tools {
		if !t.Listed {
			continue
		}
		v.ToolCount++
		if t.Enabled && !t.Quarantined {
			v.EnabledTools++
		}
		if t.Quarantined {
			v.Quarantined++
		}
		if t.ExposedName == "" {
			v.NameProblems++
		}
	}
	if withTools {
		v.Tools = make([]mcpgate.ServerTool, 0, len(tools))
		for _, t := range tools {
			v.Tools = append(v.Tools, toolView(t))
		}
	}
	return &v
}

func toolView(t store.UpstreamTool) mcpgate.ServerTool {
	v := mcpgate.ServerTool{Name: t.Name, ExposedName: t.ExposedName, Alias: t.Alias, NameProblem: t.NameProblem,
		Enabled: t.Enabled, Approval: t.Approval, Pinned: t.Pin != "", Quarantined: t.Quarantined, Listed: t.Listed,
		Annotations: t.Hints, Definition: t.Definition}
	if def, err := upstream.ParseTool(t.Definition); err == nil {
		v.Title, v.Description = def.Title, def.Description
		if v.Title == "" {
			v.Title = def.Annotations.Title
		}
	}
	if t.Quarantined {
		if c, err := toolChange(t.Definition, t.Pending); err == nil {
			v.Change = c
		}
	}
	return v
}
