package e2b

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
)

// Page is one page of a list. NextToken is empty on the last page: E2B sends
// X-Next-Token only when more pages exist. Tokens are opaque and bound to the
// query that produced them; pass them back unchanged.
type Page[T any] struct {
	Items     []T
	NextToken string
}

// SandboxPage is a page of GET /v2/sandboxes. TotalRunning is the number of
// running sandboxes matching the filters before paging, or nil when E2B did
// not send it (running was not among the requested states).
type SandboxPage struct {
	Page[ListedSandbox]
	TotalRunning *int
}

// ListSandboxesParams are the filters of GET /v2/sandboxes.
type ListSandboxesParams struct {
	// States filters by state; empty means running and paused.
	States []string
	// Metadata must all match exactly (AND).
	Metadata     map[string]string
	StartedAfter time.Time
	Template     string
	Limit        int
	NextToken    string
}

// LogsParams are the query of GET /v2/sandboxes/{id}/logs.
type LogsParams struct {
	// Cursor is in Unix milliseconds; zero means now (or the start of
	// retention, going forward).
	Cursor    int64
	Limit     int
	Direction string // forward or backward (E2B's default)
	Level     string
	Search    string
}

// ListDefaultTemplates calls the dashboard API's GET /templates/defaults.
func (cl *Client) ListDefaultTemplates(ctx context.Context, key mcpgate.Secret) ([]DefaultTemplate, error) {
	var out struct {
		Templates []DefaultTemplate `json:"templates"`
	}
	_, err := cl.do(ctx, key, call{op: "list default templates", method: http.MethodGet,
		path: "/templates/defaults", dashboard: true}, &out)
	return out.Templates, err
}

// ListTemplates calls GET /v2/templates: the team's own templates.
func (cl *Client) ListTemplates(ctx context.Context, key mcpgate.Secret, limit int, nextToken string) (Page[Template], error) {
	var out []Template
	res, err := cl.do(ctx, key, call{op: "list templates", method: http.MethodGet, path: "/v2/templates",
		query: pageQuery(nil, limit, nextToken)}, &out)
	return Page[Template]{Items: out, NextToken: res.header.Get("X-Next-Token")}, err
}

// GetTemplate calls GET /templates/{templateID}: one page of its builds. The
// path takes a template ID, not an alias.
func (cl *Client) GetTemplate(ctx context.Context, key mcpgate.Secret, templateID string, limit int, nextToken string) (TemplateWithBuilds, string, error) {
	var out TemplateWithBuilds
	what := "template " + strconv.Quote(templateID)
	res, err := cl.do(ctx, key, call{op: "list template builds", method: http.MethodGet,
		path: "/templates/" + url.PathEscape(templateID), query: pageQuery(nil, limit, nextToken), what: what,
		notFound:  what + " was not found: use a template ID (not an alias) from e2b_list_templates",
		forbidden: what + " belongs to another team (public templates included): only the team's own templates' builds can be listed",
	}, &out)
	return out, res.header.Get("X-Next-Token"), err
}

// CreateSandbox creates a sandbox. A secure one (the default) goes to POST
// /v2/sandboxes, the route E2B's JS SDK uses since 2.x (e2b 2.51.0,
// dist/index.d.ts: "Create sandbox (v2)", v1 "deprecated, use POST
// /v2/sandboxes instead") and which always secures envd, so its body has no
// secure field. One asked for without secure (a template whose envd predates
// it) goes to POST /sandboxes, which E2B still serves (infra
// handlers/sandbox_create.go) and is the only route that can create it.
func (cl *Client) CreateSandbox(ctx context.Context, key mcpgate.Secret, in NewSandbox) (Sandbox, error) {
	var out Sandbox
	what := "template " + strconv.Quote(in.TemplateID)
	c := call{op: "create a sandbox", method: http.MethodPost, path: "/v2/sandboxes", body: sandboxV2{NewSandbox: in},
		what:      what,
		notFound:  what + " (or its tag) was not found: list templates with e2b_list_templates or e2b_list_default_templates",
		forbidden: "E2B refused to create the sandbox: the team has no access to " + what + " or to a requested feature, or the team is blocked",
	}
	if !in.Secure {
		c.path, c.body = "/sandboxes", in
	}
	_, err := cl.do(ctx, key, c, &out)
	return out, err
}

// ListSandboxes calls GET /v2/sandboxes. It sends the state filter
// comma-separated (E2B rejects repeated state keys) and the metadata filter
// encoded as metadataFilter describes.
func (cl *Client) ListSandboxes(ctx context.Context, key mcpgate.Secret, p ListSandboxesParams) (SandboxPage, error) {
	q := pageQuery(nil, p.Limit, p.NextToken)
	if len(p.States) > 0 {
		q.Set("state", strings.Join(p.States, ","))
	}
	if len(p.Metadata) > 0 {
		q.Set("metadata", metadataFilter(p.Metadata))
	}
	if !p.StartedAfter.IsZero() {
		q.Set("startedAfter", p.StartedAfter.UTC().Format(time.RFC3339Nano))
	}
	if p.Template != "" {
		q.Set("template", p.Template)
	}
	var out []ListedSandbox
	res, err := cl.do(ctx, key, call{op: "list sandboxes", method: http.MethodGet, path: "/v2/sandboxes", query: q}, &out)
	if err != nil {
		return SandboxPage{}, err
	}
	page := SandboxPage{Page: Page[ListedSandbox]{Items: out, NextToken: res.header.Get("X-Next-Token")}}
	if n, err := strconv.Atoi(res.header.Get("X-Total-Running")); err == nil {
		page.TotalRunning = &n
	}
	return page, nil
}

// metadataFilter returns the value of the metadata query parameter for
// pairs, before the query encoder escapes it once more (the third level).
//
// E2B's server undoes three levels: the framework decodes the query, then
// parseFilters (infra packages/api/internal/utils/sandboxes_list.go) unescapes
// the whole value, splits it on & and =, and unescapes each key and value
// again. The SDKs encode to match (E2B packages/js-sdk/src/sandbox/sandboxApi.ts:
// encodeURIComponent on each key and value, then URLSearchParams; the Python
// SDK's sandbox_sync/paginator.py: quote, then urlencode). With one level
// fewer, a "+" in a value reaches the filter as a space and "&", "=" or "%"
// break the parse.
func metadataFilter(pairs map[string]string) string {
	escaped := url.Values{}
	for k, v := range pairs {
		escaped.Set(url.QueryEscape(k), url.QueryEscape(v))
	}
	return escaped.Encode()
}

// GetSandbox calls GET /sandboxes/{id}.
func (cl *Client) GetSandbox(ctx context.Context, key mcpgate.Secret, id string) (SandboxDetail, error) {
	var out SandboxDetail
	_, err := cl.do(ctx, key, sandboxCall("get sandbox", http.MethodGet, id, "", nil), &out)
	return out, err
}

// SandboxLogs calls GET /v2/sandboxes/{id}/logs.
func (cl *Client) SandboxLogs(ctx context.Context, key mcpgate.Secret, id string, p LogsParams) ([]LogEntry, error) {
	q := url.Values{}
	if p.Cursor > 0 {
		q.Set("cursor", strconv.FormatInt(p.Cursor, 10))
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	for k, v := range map[string]string{"direction": p.Direction, "level": p.Level, "search": p.Search} {
		if v != "" {
			q.Set(k, v)
		}
	}
	c := sandboxCall("read sandbox logs", http.MethodGet, id, "/logs", nil)
	c.path = "/v2" + c.path
	c.query = q
	var out struct {
		Logs []LogEntry `json:"logs"`
	}
	_, err := cl.do(ctx, key, c, &out)
	return out.Logs, err
}

// SandboxMetrics calls GET /sandboxes/{id}/metrics for [start, end]; a zero
// bound is left to E2B (the first or last sample). Bounds go in Unix seconds.
func (cl *Client) SandboxMetrics(ctx context.Context, key mcpgate.Secret, id string, start, end time.Time) ([]Metric, error) {
	q := url.Values{}
	if !start.IsZero() {
		q.Set("start", strconv.FormatInt(start.Unix(), 10))
	}
	if !end.IsZero() {
		q.Set("end", strconv.FormatInt(end.Unix(), 10))
	}
	c := sandboxCall("read sandbox metrics", http.MethodGet, id, "/metrics", nil)
	c.query = q
	var out []Metric
	_, err := cl.do(ctx, key, c, &out)
	return out, err
}

// SetSandboxTimeout calls POST /sandboxes/{id}/timeout: the sandbox now ends
// timeout seconds from now, replacing the old end time, but never later than
// its start plus the plan's maximum lifetime (E2B clamps silently and answers
// 204 without a body).
func (cl *Client) SetSandboxTimeout(ctx context.Context, key mcpgate.Secret, id string, timeout int) error {
	c := sandboxCall("set the sandbox timeout", http.MethodPost, id, "/timeout", map[string]int{"timeout": timeout})
	// E2B answers 409 only while the sandbox is pausing, snapshotting or
	// being killed; a paused one gets 404 (see timeoutNotFound).
	c.conflict = sandboxWhat(id) + " is being paused, snapshotted or killed right now; check it with e2b_get_sandbox " +
		"before trying again (a paused sandbox is resumed with e2b_resume_sandbox)"
	_, err := cl.do(ctx, key, c, nil)
	return err
}

// PauseSandbox calls POST /sandboxes/{id}/pause. memory false keeps only the
// filesystem.
func (cl *Client) PauseSandbox(ctx context.Context, key mcpgate.Secret, id string, memory bool) error {
	c := sandboxCall("pause the sandbox", http.MethodPost, id, "/pause", map[string]bool{"memory": memory})
	c.conflict = sandboxWhat(id) + " is already paused or is changing state; nothing was done"
	_, err := cl.do(ctx, key, c, nil)
	return err
}

// ConnectSandbox calls POST /v2/sandboxes/{id}/connect, the JS SDK's route
// (e2b 2.51.0; the v1 route is deprecated): it resumes a paused sandbox
// (201) or extends a running one to at least now + timeout (200).
func (cl *Client) ConnectSandbox(ctx context.Context, key mcpgate.Secret, id string, timeout int) (Sandbox, error) {
	c := sandboxCall("resume the sandbox", http.MethodPost, id, "/connect", map[string]int{"timeout": timeout})
	c.path = "/v2" + c.path
	c.notFound = sandboxWhat(id) + " was not found: it is neither running nor paused (killed, expired without auto-pause, or never existed)"
	c.conflict = sandboxWhat(id) + " is being killed or is changing state; check it with e2b_get_sandbox before trying again"
	var out Sandbox
	res, err := cl.do(ctx, key, c, &out)
	out.Resumed = res.status == http.StatusCreated
	return out, err
}

// ListSnapshots calls GET /snapshots: persistent snapshot templates (not
// paused sandboxes).
func (cl *Client) ListSnapshots(ctx context.Context, key mcpgate.Secret, sandboxID, name string, limit int, nextToken string) (Page[Snapshot], error) {
	q := pageQuery(nil, limit, nextToken)
	if sandboxID != "" {
		q.Set("sandboxID", sandboxID)
	}
	if name != "" {
		q.Set("name", name)
	}
	var out []Snapshot
	res, err := cl.do(ctx, key, call{op: "list snapshots", method: http.MethodGet, path: "/snapshots", query: q}, &out)
	return Page[Snapshot]{Items: out, NextToken: res.header.Get("X-Next-Token")}, err
}

// KillSandbox calls DELETE /sandboxes/{id}. It kills a running sandbox and
// deletes a paused one's saved state.
func (cl *Client) KillSandbox(ctx context.Context, key mcpgate.Secret, id string) error {
	_, err := cl.do(ctx, key, sandboxCall("kill the sandbox", http.MethodDelete, id, "", nil), nil)
	return err
}

// sandboxCall is a call on /sandboxes/{id}{suffix} with the sandbox 404
// wording: E2B answers 404 alike for unknown, foreign, killed and expired
// sandboxes, and never reveals which.
func sandboxCall(op, method, id, suffix string, body any) call {
	what := sandboxWhat(id)
	return call{op: op, method: method, path: sandboxPath(id, suffix), body: body, what: what,
		notFound: what + " was not found: it never existed, belongs to another team, was killed, " +
			"or expired at its timeout (list current ones with e2b_list_sandboxes)"}
}
