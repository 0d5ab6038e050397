package e2b

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

const (
	// idleConcurrency bounds the metrics calls in flight towards E2B for one
	// e2b_find_idle_sandboxes call.
	idleConcurrency = 8
	// idleMaxSandboxes bounds how many running sandboxes one call inspects,
	// and so its fan-out: one metrics call each, plus a list call per 100.
	// At 2,000 one tools/call cost E2B 2,020 requests and a key's 40-call
	// burst 80,000; 200 keeps a call near its own rate limit's scale, and
	// Truncated tells the caller to narrow by template or metadata.
	idleMaxSandboxes = 200
)

// FindIdleIn is e2b_find_idle_sandboxes's input.
type FindIdleIn struct {
	WindowMinutes   int     `json:"window_minutes,omitempty" jsonschema:"how far back to look at CPU use, in minutes"`
	CPUThresholdPct float64 `json:"cpu_threshold_pct,omitempty" jsonschema:"a sandbox is idle if its CPU use stayed under this percentage for the whole window"`
	Template        string  `json:"template,omitempty" jsonschema:"only sandboxes of this template ID or name"`
	Metadata        string  `json:"metadata,omitempty" jsonschema:"only sandboxes whose metadata has all these pairs exactly, as user=abc&app=prod; a + is a plus sign; write & = or % inside a key or value as %26 %3D %25"`
}

// IdleSandbox is a running sandbox and the figures that judged it.
type IdleSandbox struct {
	SandboxID     string            `json:"sandbox_id"`
	TemplateID    string            `json:"template_id"`
	StartedAt     string            `json:"started_at"`
	EndAt         string            `json:"end_at"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	Samples       int               `json:"samples"`
	AvgCPUUsedPct float64           `json:"avg_cpu_used_pct"`
	MaxCPUUsedPct float64           `json:"max_cpu_used_pct"`
}

// SkippedSandbox is a running sandbox that could not be judged.
type SkippedSandbox struct {
	SandboxID string `json:"sandbox_id"`
	Reason    string `json:"reason"`
}

// FindIdleOut is e2b_find_idle_sandboxes's output.
type FindIdleOut struct {
	WindowMinutes   int              `json:"window_minutes"`
	CPUThresholdPct float64          `json:"cpu_threshold_pct"`
	WindowStart     string           `json:"window_start"`
	WindowEnd       string           `json:"window_end"`
	Checked         int              `json:"checked"`
	Idle            []IdleSandbox    `json:"idle"`
	ActiveCount     int              `json:"active_count"`
	Skipped         []SkippedSandbox `json:"skipped,omitempty"`
	// Truncated is true when more than idleMaxSandboxes were running and
	// only the newest were inspected.
	Truncated bool `json:"truncated,omitempty"`
}

func (c *Connector) findIdleSandboxesTool() *connectors.Tool {
	return connectors.NewTool(connectors.Spec{
		Name:  ToolFindIdleSandboxes,
		Title: "Find idle E2B sandboxes",
		Description: "Find running sandboxes whose CPU use stayed under cpu_threshold_pct (default 5%) for the last " +
			"window_minutes (default 10): candidates to pause or kill to save money. Returns the figures used for each. " +
			"Sandboxes younger than the window are skipped. It changes nothing; acting on the result is up to the user. Read-only.",
		Annotations:    readOnly,
		DefaultEnabled: true,
		// One list and then a metrics read per running sandbox: twice the
		// gateway's default deadline.
		Timeout: time.Minute,
		Schema: edits(withDefault("window_minutes", 10), withRange("window_minutes", 1, 1440),
			withDefault("cpu_threshold_pct", 5), withRange("cpu_threshold_pct", 0.1, 100),
			withPattern("template", `^[^:]{1,256}$`), withMaxLength("metadata", 2048)),
		Output: outputEdits,
	}, c.findIdle)
}

func (c *Connector) findIdle(ctx context.Context, key mcpgate.Secret, in FindIdleIn) (FindIdleOut, error) {
	p, err := listParams("running", in.Template, in.Metadata, "")
	if err != nil {
		return FindIdleOut{}, err
	}
	end := c.client.now()
	start := end.Add(-time.Duration(in.WindowMinutes) * time.Minute)
	out := FindIdleOut{WindowMinutes: in.WindowMinutes, CPUThresholdPct: in.CPUThresholdPct,
		WindowStart: timestamp(start.Truncate(time.Second)), WindowEnd: timestamp(end.Truncate(time.Second)), Idle: []IdleSandbox{}}

	running, truncated, err := c.allRunning(ctx, key, p)
	if err != nil {
		return FindIdleOut{}, err
	}
	out.Truncated = truncated

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		fatal    error
		sem      = make(chan struct{}, idleConcurrency)
		verdicts = make([]func(*FindIdleOut), len(running))
	)
	for i, s := range running {
		if s.StartedAt.After(start) {
			verdicts[i] = skip(s.SandboxID, "started less than the window ago")
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				return
			}
			ms, err := c.client.SandboxMetrics(ctx, key, s.SandboxID, start, end)
			switch code := mcpgate.ErrorCode(err); {
			case err == nil:
				verdicts[i] = judge(s, ms, in.CPUThresholdPct)
			case code == mcpgate.ETooMany || code == mcpgate.EUnauthorized || code == mcpgate.EForbidden:
				// Every other call would fail the same way; stop rather than
				// hammer E2B.
				mu.Lock()
				if fatal == nil {
					fatal = err
				}
				mu.Unlock()
				cancel()
			case code == mcpgate.ENotFound:
				verdicts[i] = skip(s.SandboxID, "no longer exists")
			default:
				verdicts[i] = skip(s.SandboxID, "metrics unavailable: "+mcpgate.ErrorMessage(err))
			}
		}()
	}
	wg.Wait()
	if fatal != nil {
		return FindIdleOut{}, fatal
	}
	if err := ctx.Err(); err != nil {
		return FindIdleOut{}, mcpgate.WrapError(mcpgate.EUnavailable, err, "finding idle sandboxes was cancelled")
	}
	for _, v := range verdicts {
		if v != nil {
			v(&out)
		}
	}
	out.Checked = len(running)
	// Most idle first: the likeliest candidates lead.
	sort.SliceStable(out.Idle, func(i, j int) bool { return out.Idle[i].MaxCPUUsedPct < out.Idle[j].MaxCPUUsedPct })
	return out, nil
}

// allRunning lists every running sandbox matching p, following X-Next-Token
// to the last page.
func (c *Connector) allRunning(ctx context.Context, key mcpgate.Secret, p ListSandboxesParams) ([]ListedSandbox, bool, error) {
	var all []ListedSandbox
	p.Limit = 100
	seen := map[string]bool{}
	for {
		page, err := c.client.ListSandboxes(ctx, key, p)
		if err != nil {
			return nil, false, err
		}
		for _, s := range page.Items {
			// A sandbox can move between pages while we list; count it once.
			if !seen[s.SandboxID] && s.State == "running" {
				seen[s.SandboxID] = true
				all = append(all, s)
			}
		}
		if len(all) >= idleMaxSandboxes {
			return all[:idleMaxSandboxes], true, nil
		}
		if page.NextToken == "" {
			return all, false, nil
		}
		p.NextToken = page.NextToken
	}
}

func skip(id, reason string) func(*FindIdleOut) {
	return func(o *FindIdleOut) { o.Skipped = append(o.Skipped, SkippedSandbox{SandboxID: id, Reason: reason}) }
}

// judge flags s as idle when every sample in the window is under the
// threshold: "stayed under", so one busy sample makes it active.
func judge(s ListedSandbox, ms []Metric, threshold float64) func(*FindIdleOut) {
	sum := summarize(ms)
	if sum == nil {
		return skip(s.SandboxID, "no metrics in the window")
	}
	if sum.MaxCPUUsedPct >= threshold {
		return func(o *FindIdleOut) { o.ActiveCount++ }
	}
	idle := IdleSandbox{SandboxID: s.SandboxID, TemplateID: s.TemplateID, StartedAt: timestamp(s.StartedAt),
		EndAt: timestamp(s.EndAt), Metadata: s.Metadata, Samples: sum.Samples,
		AvgCPUUsedPct: sum.AvgCPUUsedPct, MaxCPUUsedPct: sum.MaxCPUUsedPct}
	return func(o *FindIdleOut) { o.Idle = append(o.Idle, idle) }
}
