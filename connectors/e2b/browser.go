package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// The dashboard's view of sandboxes: read through the connector's own tools,
// so a person sees what the AI sees under the same policy and audit.

var _ connectors.Browser = (*Connector)(nil)

// ResourceNames implements connectors.Browser.
func (c *Connector) ResourceNames() (singular, plural, upstream string) {
	return "sandbox", "sandboxes", "E2B"
}

func callInto(ctx context.Context, call connectors.Caller, tool string, args map[string]any, out any) error {
	raw, err := call(ctx, tool, args)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return mcpgate.WrapError(mcpgate.EUpstream, err, "E2B's answer could not be read")
	}
	return nil
}

// ListResources implements connectors.Browser: one page of up to 100
// sandboxes, running ones first, newest first.
func (c *Connector) ListResources(ctx context.Context, call connectors.Caller, page string) (*mcpgate.ResourcePage, error) {
	args := map[string]any{"limit": 100}
	if page != "" {
		args["next_token"] = page
	}
	var out ListSandboxesOut
	if err := callInto(ctx, call, ToolListSandboxes, args, &out); err != nil {
		return nil, err
	}
	slices.SortStableFunc(out.Data, func(a, b SandboxOut) int {
		if (a.State == "running") != (b.State == "running") {
			if a.State == "running" {
				return -1
			}
			return 1
		}
		return strings.Compare(b.StartedAt, a.StartedAt)
	})
	p := &mcpgate.ResourcePage{Next: out.NextToken}
	for _, s := range out.Data {
		p.Resources = append(p.Resources, resourceOf(s))
	}
	if out.TotalRunning != nil {
		p.Note = fmt.Sprintf("E2B reports %d running in the team", *out.TotalRunning)
	}
	return p, nil
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

func resourceOf(s SandboxOut) mcpgate.Resource {
	kind := s.Alias
	if kind == "" {
		kind = s.TemplateID
	}
	r := mcpgate.Resource{ID: s.SandboxID, Kind: kind, State: s.State, Active: s.State == "running",
		StartedAt: parseTime(s.StartedAt), EndsAt: parseTime(s.EndAt), PausedAt: parseTime(s.PausedAt),
		Size: fmt.Sprintf("%d vCPU · %d MB", s.CPUCount, s.MemoryMB)}
	keys := make([]string, 0, len(s.Metadata))
	for k := range s.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r.Labels = append(r.Labels, mcpgate.Label{Key: k, Value: s.Metadata[k]})
	}
	return r
}

// extensions are the end times a person can pick on a running sandbox.
var extensions = []mcpgate.ChoiceOption{{Value: 300, Label: "5 minutes from now"}, {Value: 900, Label: "15 minutes from now"},
	{Value: 3600, Label: "1 hour from now"}, {Value: 4 * 3600, Label: "4 hours from now"}}

// GetResource implements connectors.Browser: the sandbox, its CPU and memory
// over the last 30 minutes (while it runs), its last 100 log lines, and what
// can be done to it.
func (c *Connector) GetResource(ctx context.Context, call connectors.Caller, id string, now time.Time) (*mcpgate.ResourceDetail, error) {
	var s SandboxDetailOut
	if err := callInto(ctx, call, ToolGetSandbox, map[string]any{"sandbox_id": id}, &s); err != nil {
		return nil, err
	}
	d := &mcpgate.ResourceDetail{Resource: resourceOf(s.SandboxOut)}
	d.Size = fmt.Sprintf("%d vCPU · %d MB memory", s.CPUCount, s.MemoryMB)
	if s.DiskSizeMB > 0 {
		d.Size += fmt.Sprintf(" · %d MB disk", s.DiskSizeMB)
	}
	d.Facts = append(d.Facts, mcpgate.Fact{Label: "Template ID", Value: s.TemplateID, Code: true})
	if s.EnvdVersion != "" {
		d.Facts = append(d.Facts, mcpgate.Fact{Label: "envd", Value: s.EnvdVersion})
	}
	if s.AllowInternetAccess != nil {
		v := "blocked"
		if *s.AllowInternetAccess {
			v = "allowed"
		}
		d.Facts = append(d.Facts, mcpgate.Fact{Label: "Internet access", Value: v})
	}
	if l := s.Lifecycle; l != nil {
		v := l.OnTimeout
		if v == "" {
			v = "kill"
		}
		if l.AutoResume {
			v += ", resumes automatically"
		}
		d.Facts = append(d.Facts, mcpgate.Fact{Label: "On timeout", Value: v})
	}
	if s.Domain != "" {
		d.Facts = append(d.Facts, mcpgate.Fact{Label: "Domain", Value: s.Domain})
	}
	if d.Active {
		c.usage(ctx, call, d, now)
	} else {
		d.SeriesNote = "Metrics are collected while the sandbox runs; resume it to see them."
	}
	var logs LogsOut
	if err := callInto(ctx, call, ToolGetSandboxLogs, map[string]any{"sandbox_id": id, "limit": 100}, &logs); err != nil {
		d.LogsError = mcpgate.ErrorMessage(err)
	}
	for _, l := range logs.Logs {
		d.Logs = append(d.Logs, mcpgate.LogLine{Time: parseTime(l.Timestamp), Level: l.Level, Message: l.Message, Fields: l.Fields})
	}
	d.Actions = sandboxActions(s.SandboxOut)
	return d, nil
}

// usage reads the last 30 minutes of samples (from the start, if later).
func (c *Connector) usage(ctx context.Context, call connectors.Caller, d *mcpgate.ResourceDetail, now time.Time) {
	start := now.Add(-30 * time.Minute)
	if d.StartedAt.After(start) {
		start = d.StartedAt
	}
	var m MetricsOut
	if err := callInto(ctx, call, ToolGetSandboxMetrics, map[string]any{"sandbox_id": d.ID, "start": start.Unix()}, &m); err != nil {
		d.SeriesError = mcpgate.ErrorMessage(err)
		return
	}
	cpu := mcpgate.Series{Title: "CPU used", Max: 100, Format: "pct"}
	mem := mcpgate.Series{Title: "Memory used", Format: "bytes"}
	for _, s := range m.Metrics {
		t, err := time.Parse(time.RFC3339Nano, s.Timestamp)
		if err != nil {
			continue
		}
		cpu.Points = append(cpu.Points, mcpgate.Point{T: t, V: s.CPUUsedPct})
		mem.Points = append(mem.Points, mcpgate.Point{T: t, V: float64(s.MemUsedBytes)})
		mem.Max = max(mem.Max, float64(s.MemTotalBytes))
	}
	d.Series = []mcpgate.Series{cpu, mem}
}

func sandboxActions(s SandboxOut) []mcpgate.ResourceAction {
	id := map[string]any{"sandbox_id": s.SandboxID}
	var out []mcpgate.ResourceAction
	if s.State == "running" {
		out = append(out,
			mcpgate.ResourceAction{Tool: ToolPauseSandbox, Label: "Pause", Args: id, Done: "Sandbox paused."},
			mcpgate.ResourceAction{Tool: ToolSetSandboxTimeout, Label: "Set end time", Args: id, Done: "End time set.",
				Choice: &mcpgate.ActionChoice{Arg: "timeout", Label: "Run for", Options: extensions, Default: 3600}})
	} else {
		out = append(out, mcpgate.ResourceAction{Tool: ToolResumeSandbox, Label: "Resume", Args: id, Primary: true, Done: "Sandbox resumed."})
	}
	out = append(out, mcpgate.ResourceAction{Tool: ToolKillSandbox, Label: "Kill…", Args: id, Danger: true, Leaves: true,
		Done: "Sandbox " + s.SandboxID + " was killed.",
		Confirm: &mcpgate.ActionConfirm{Title: "Kill this sandbox?", Action: "Kill sandbox", TypeToConfirm: s.SandboxID,
			Text: "Killing ends the sandbox and deletes its files and memory. This cannot be undone."}})
	return out
}
