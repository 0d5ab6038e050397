package web

import (
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
)

// The sandbox pages read E2B through the workspace's tools, so that what a
// person sees is exactly what the AI sees, under the same policy and audit.

type sandboxOut struct {
	SandboxID  string            `json:"sandbox_id"`
	TemplateID string            `json:"template_id"`
	Alias      string            `json:"alias"`
	State      string            `json:"state"`
	StartedAt  string            `json:"started_at"`
	EndAt      string            `json:"end_at"`
	PausedAt   string            `json:"paused_at"`
	CPUCount   int               `json:"cpu_count"`
	MemoryMB   int               `json:"memory_mb"`
	DiskSizeMB int               `json:"disk_size_mb"`
	Envd       string            `json:"envd_version"`
	Metadata   map[string]string `json:"metadata"`
}

// Template is the template's name where E2B gave one, else its id.
func (s sandboxOut) Template() string {
	if s.Alias != "" {
		return s.Alias
	}
	return s.TemplateID
}

// MetadataPairs returns the metadata sorted by key.
func (s sandboxOut) MetadataPairs() []kv {
	out := make([]kv, 0, len(s.Metadata))
	for k, v := range s.Metadata {
		out = append(out, kv{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].K < out[j].K })
	return out
}

type kv struct{ K, V string }

type sandboxesPage struct {
	Connection   *mcpgate.Connection
	Error        string
	Sandboxes    []sandboxOut
	Running      int
	Paused       int
	TotalRunning *int
	NextURL      string
	Paged        bool
}

func (h *handler) handleSandboxes(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws, u := workspaceFrom(ctx), mcpgate.UserFromContext(ctx)
	conn, err := h.connection(ctx)
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	p := sandboxesPage{Connection: conn}
	if conn != nil {
		args := map[string]any{"limit": 100}
		if next := r.URL.Query().Get("next"); next != "" && len(next) < 512 {
			args["next_token"] = next
			p.Paged = true
		}
		var out struct {
			Data         []sandboxOut `json:"data"`
			NextToken    string       `json:"next_token"`
			TotalRunning *int         `json:"total_running"`
		}
		if err := h.callTool(r, ws.ID, u.ID, "e2b_list_sandboxes", args, &out); err != nil {
			p.Error = mcpgate.ErrorMessage(err)
		} else {
			p.Sandboxes, p.TotalRunning = out.Data, out.TotalRunning
			slices.SortStableFunc(p.Sandboxes, func(a, b sandboxOut) int {
				if a.State != b.State {
					if a.State == "running" {
						return -1
					}
					if b.State == "running" {
						return 1
					}
				}
				return strings.Compare(b.StartedAt, a.StartedAt)
			})
			for _, s := range p.Sandboxes {
				if s.State == "paused" {
					p.Paused++
				} else {
					p.Running++
				}
			}
			if out.NextToken != "" {
				p.NextURL = "/app/w/" + ws.ID + "/sandboxes?next=" + url.QueryEscape(out.NextToken)
			}
		}
	}
	h.render(w, r, http.StatusOK, "sandboxes", h.newView(r, "Sandboxes", "sandboxes", p))
}

// callTool runs a tool for the page's user and decodes its output.
func (h *handler) callTool(r *http.Request, wsID, userID, tool string, args map[string]any, out any) error {
	raw, err := json.Marshal(args)
	if err != nil {
		return err
	}
	res, err := h.svc.Tools.CallTool(r.Context(), actorFrom(r.Context()), mcpgate.ToolCall{Tool: tool, Arguments: raw})
	if err != nil {
		if mcpgate.ErrorCode(err) == mcpgate.EInternal {
			h.log.ErrorContext(r.Context(), "dashboard tool call", "tool", tool, "err", err)
		}
		return err
	}
	if err := json.Unmarshal(res, out); err != nil {
		return mcpgate.WrapError(mcpgate.EUpstream, err, "E2B's answer could not be read")
	}
	return nil
}

type sandboxDetail struct {
	sandboxOut
	AllowInternetAccess *bool  `json:"allow_internet_access"`
	Domain              string `json:"domain"`
	Lifecycle           *struct {
		AutoResume bool   `json:"autoResume"`
		OnTimeout  string `json:"onTimeout"`
	} `json:"lifecycle"`
}

type logLine struct {
	Timestamp string            `json:"timestamp"`
	Level     string            `json:"level"`
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields"`
}

type sandboxPage struct {
	ID           string
	Sandbox      *sandboxDetail
	Error        string
	NotFound     bool
	CPU          *lineChart
	Memory       *lineChart
	MetricsError string
	Logs         []logLine
	LogsError    string
	CanKill      bool
	KillNeedsAsk bool
	Extensions   []extension
}

type extension struct {
	Seconds int
	Label   string
}

func (h *handler) handleSandbox(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws, u := workspaceFrom(ctx), mcpgate.UserFromContext(ctx)
	id := chi.URLParam(r, "id")
	p := sandboxPage{ID: id, Extensions: []extension{{300, "5 minutes"}, {900, "15 minutes"}, {3600, "1 hour"}, {4 * 3600, "4 hours"}}}
	tools, err := h.svc.Tools.Tools(ctx, actorFrom(ctx))
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	for _, t := range tools {
		if t.Name == "e2b_kill_sandbox" {
			p.CanKill = t.Enabled
		}
	}
	var d sandboxDetail
	if err := h.callTool(r, ws.ID, u.ID, "e2b_get_sandbox", map[string]any{"sandbox_id": id}, &d); err != nil {
		p.Error = mcpgate.ErrorMessage(err)
		p.NotFound = mcpgate.ErrorCode(err) == mcpgate.ENotFound
		status := http.StatusOK
		if p.NotFound {
			status = http.StatusNotFound
		}
		h.render(w, r, status, "sandbox", h.newView(r, "Sandbox "+id, "sandboxes", p))
		return
	}
	p.Sandbox = &d
	if d.State == "running" {
		h.sandboxMetrics(r, ws.ID, u.ID, &d, &p)
	} else {
		p.MetricsError = "Metrics are collected while the sandbox runs; resume it to see them."
	}
	var logs struct {
		Logs []logLine `json:"logs"`
	}
	if err := h.callTool(r, ws.ID, u.ID, "e2b_get_sandbox_logs", map[string]any{"sandbox_id": id, "limit": 100}, &logs); err != nil {
		p.LogsError = mcpgate.ErrorMessage(err)
	} else {
		p.Logs = logs.Logs
	}
	h.render(w, r, http.StatusOK, "sandbox", h.newView(r, "Sandbox "+id, "sandboxes", p))
}

// sandboxMetrics reads the last 30 minutes of samples and draws them.
func (h *handler) sandboxMetrics(r *http.Request, wsID, userID string, d *sandboxDetail, p *sandboxPage) {
	start := h.opts.Now().Add(-30 * time.Minute)
	if t, err := time.Parse(time.RFC3339Nano, d.StartedAt); err == nil && t.After(start) {
		start = t
	}
	var m struct {
		Metrics []struct {
			Timestamp     string  `json:"timestamp"`
			CPUUsedPct    float64 `json:"cpu_used_pct"`
			MemUsedBytes  int64   `json:"mem_used_bytes"`
			MemTotalBytes int64   `json:"mem_total_bytes"`
		} `json:"metrics"`
	}
	if err := h.callTool(r, wsID, userID, "e2b_get_sandbox_metrics", map[string]any{"sandbox_id": d.SandboxID, "start": start.Unix()}, &m); err != nil {
		p.MetricsError = mcpgate.ErrorMessage(err)
		return
	}
	var cpu, mem []point
	var memTotal int64
	for _, s := range m.Metrics {
		t, err := time.Parse(time.RFC3339Nano, s.Timestamp)
		if err != nil {
			continue
		}
		cpu = append(cpu, point{t, s.CPUUsedPct})
		mem = append(mem, point{t, float64(s.MemUsedBytes)})
		memTotal = max(memTotal, s.MemTotalBytes)
	}
	p.CPU = newLineChart("CPU used", cpu, 100, func(v float64) string { return formatPct(v) })
	p.Memory = newLineChart("Memory used", mem, float64(memTotal), func(v float64) string { return fmtBytes(int64(v)) })
	if memTotal > 0 {
		p.Memory.Unit = "of " + fmtBytes(memTotal)
	}
}

func formatPct(v float64) string {
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + "%"
}
