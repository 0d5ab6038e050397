package e2b

import (
	"strings"
	"time"
)

// Tool outputs: snake_case, RFC 3339 UTC timestamps, sizes with their units
// in the name. They are built field by field from the wire types and have no
// field that could hold a secret.

// timestamp formats t as RFC 3339 in UTC, or "" for the zero time (omitted).
func timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func timestampPtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return timestamp(*t)
}

// SandboxOut is a sandbox as the tools show it. A running sandbox has
// end_at (its expiry); a paused one has paused_at instead, because E2B reports
// the pause time in the same field.
type SandboxOut struct {
	SandboxID    string            `json:"sandbox_id"`
	TemplateID   string            `json:"template_id"`
	Alias        string            `json:"alias,omitempty"`
	State        string            `json:"state"`
	StartedAt    string            `json:"started_at"`
	EndAt        string            `json:"end_at,omitempty"`
	PausedAt     string            `json:"paused_at,omitempty"`
	CPUCount     int32             `json:"cpu_count"`
	MemoryMB     int32             `json:"memory_mb"`
	DiskSizeMB   int32             `json:"disk_size_mb"`
	EnvdVersion  string            `json:"envd_version,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	VolumeMounts []VolumeMount     `json:"volume_mounts,omitempty"`
}

func sandboxOut(s ListedSandbox) SandboxOut {
	out := SandboxOut{
		SandboxID: s.SandboxID, TemplateID: s.TemplateID, Alias: s.Alias, State: s.State,
		StartedAt: timestamp(s.StartedAt), CPUCount: s.CPUCount, MemoryMB: s.MemoryMB,
		DiskSizeMB: s.DiskSizeMB, EnvdVersion: s.EnvdVersion, Metadata: s.Metadata, VolumeMounts: s.VolumeMounts,
	}
	if s.State == "paused" {
		out.PausedAt = timestamp(s.EndAt)
	} else {
		out.EndAt = timestamp(s.EndAt)
	}
	return out
}

// SandboxDetailOut is e2b_get_sandbox's output.
type SandboxDetailOut struct {
	SandboxOut
	AllowInternetAccess *bool       `json:"allow_internet_access,omitempty"`
	Domain              string      `json:"domain,omitempty"`
	Lifecycle           *Lifecycle  `json:"lifecycle,omitempty"`
	Network             *NetworkOut `json:"network,omitempty"`
}

// NetworkOut is a sandbox's network configuration with every credential
// replaced by "[redacted]": the model learns that a rule or proxy login
// exists, never its value.
type NetworkOut struct {
	AllowPublicTraffic *bool                       `json:"allow_public_traffic,omitempty"`
	AllowOut           []string                    `json:"allow_out,omitempty"`
	DenyOut            []string                    `json:"deny_out,omitempty"`
	MaskRequestHost    string                      `json:"mask_request_host,omitempty"`
	EgressProxy        *EgressProxyOut             `json:"egress_proxy,omitempty"`
	Rules              map[string][]NetworkRuleOut `json:"rules,omitempty"`
}

// EgressProxyOut is the egress proxy's address; its credentials are redacted.
type EgressProxyOut struct {
	Address  string `json:"address"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// NetworkRuleOut lists the headers a rule sets, with their values redacted.
type NetworkRuleOut struct {
	Headers map[string]string `json:"headers,omitempty"`
}

const redactedValue = "[redacted]"

func redactIf(w Withheld) string {
	if w.Present() {
		return redactedValue
	}
	return ""
}

func sandboxDetailOut(d SandboxDetail) SandboxDetailOut {
	out := SandboxDetailOut{SandboxOut: sandboxOut(d.ListedSandbox), AllowInternetAccess: d.AllowInternetAccess,
		Lifecycle: d.Lifecycle, Domain: orZero(d.Domain)}
	if n := d.Network; n != nil {
		no := &NetworkOut{AllowPublicTraffic: n.AllowPublicTraffic, AllowOut: n.AllowOut, DenyOut: n.DenyOut,
			MaskRequestHost: orZero(n.MaskRequestHost)}
		if p := n.EgressProxy; p != nil {
			no.EgressProxy = &EgressProxyOut{Address: p.Address, Username: redactIf(p.Username), Password: redactIf(p.Password)}
		}
		for domain, rules := range n.Rules {
			if no.Rules == nil {
				no.Rules = map[string][]NetworkRuleOut{}
			}
			for _, r := range rules {
				ro := NetworkRuleOut{}
				if r.Transform != nil && len(r.Transform.Headers) > 0 {
					ro.Headers = map[string]string{}
					for name := range r.Transform.Headers {
						ro.Headers[name] = redactedValue
					}
				}
				no.Rules[domain] = append(no.Rules[domain], ro)
			}
		}
		out.Network = no
	}
	return out
}

// TemplateOut is a team template.
type TemplateOut struct {
	TemplateID    string   `json:"template_id"`
	Names         []string `json:"names,omitempty"`
	Aliases       []string `json:"aliases,omitempty"`
	BuildID       string   `json:"build_id,omitempty"`
	BuildStatus   string   `json:"build_status"`
	CPUCount      int32    `json:"cpu_count"`
	MemoryMB      int32    `json:"memory_mb"`
	DiskSizeMB    int32    `json:"disk_size_mb"`
	EnvdVersion   string   `json:"envd_version,omitempty"`
	Public        bool     `json:"public"`
	SpawnCount    int64    `json:"spawn_count"`
	BuildCount    int32    `json:"build_count"`
	CreatedAt     string   `json:"created_at"`
	UpdatedAt     string   `json:"updated_at"`
	LastSpawnedAt string   `json:"last_spawned_at,omitempty"`
}

// zeroBuildID is what E2B reports as buildID when no build is ready.
const zeroBuildID = "00000000-0000-0000-0000-000000000000"

func templateOut(t Template) TemplateOut {
	out := TemplateOut{
		TemplateID: t.TemplateID, Names: t.Names, Aliases: t.Aliases, BuildID: t.BuildID, BuildStatus: t.BuildStatus,
		CPUCount: t.CPUCount, MemoryMB: t.MemoryMB, DiskSizeMB: t.DiskSizeMB, EnvdVersion: t.EnvdVersion,
		Public: t.Public, SpawnCount: t.SpawnCount, BuildCount: t.BuildCount, CreatedAt: timestamp(t.CreatedAt),
		UpdatedAt: timestamp(t.UpdatedAt), LastSpawnedAt: timestampPtr(t.LastSpawnedAt),
	}
	if out.BuildID == zeroBuildID {
		out.BuildID = "" // no ready build: the zero UUID means nothing to a reader
	}
	return out
}

// DefaultTemplateOut is a default (public) template, with the dashboard
// API's names mapped onto the control plane's.
type DefaultTemplateOut struct {
	TemplateID  string   `json:"template_id"`
	Names       []string `json:"names,omitempty"`
	BuildID     string   `json:"build_id"`
	CPUCount    int64    `json:"cpu_count"`
	MemoryMB    int64    `json:"memory_mb"`
	DiskSizeMB  int64    `json:"disk_size_mb,omitempty"`
	EnvdVersion string   `json:"envd_version,omitempty"`
	Public      bool     `json:"public"`
	BuildCount  int32    `json:"build_count"`
	SpawnCount  int64    `json:"spawn_count"`
	CreatedAt   string   `json:"created_at"`
}

func defaultTemplateOut(t DefaultTemplate) DefaultTemplateOut {
	out := DefaultTemplateOut{TemplateID: t.ID, BuildID: t.BuildID, CPUCount: t.VCPU, MemoryMB: t.RAMMB,
		DiskSizeMB: orZero(t.TotalDiskSizeMB), EnvdVersion: orZero(t.EnvdVersion), Public: t.Public,
		BuildCount: t.BuildCount, SpawnCount: t.SpawnCount, CreatedAt: timestamp(t.CreatedAt)}
	for _, a := range t.Aliases {
		name := a.Alias
		if a.Namespace != nil && *a.Namespace != "" {
			name = *a.Namespace + "/" + a.Alias
		}
		out.Names = append(out.Names, name)
	}
	return out
}

// BuildOut is one template build.
type BuildOut struct {
	BuildID     string `json:"build_id"`
	Status      string `json:"status"`
	CPUCount    int32  `json:"cpu_count"`
	MemoryMB    int32  `json:"memory_mb"`
	DiskSizeMB  int32  `json:"disk_size_mb,omitempty"`
	EnvdVersion string `json:"envd_version,omitempty"`
	CreatedAt   string `json:"created_at"`
	UpdatedAt   string `json:"updated_at"`
	FinishedAt  string `json:"finished_at,omitempty"`
}

func buildOut(b TemplateBuild) BuildOut {
	return BuildOut{BuildID: b.BuildID, Status: b.Status, CPUCount: b.CPUCount, MemoryMB: b.MemoryMB,
		DiskSizeMB: orZero(b.DiskSizeMB), EnvdVersion: orZero(b.EnvdVersion), CreatedAt: timestamp(b.CreatedAt),
		UpdatedAt: timestamp(b.UpdatedAt), FinishedAt: timestampPtr(b.FinishedAt)}
}

// LogOut is one sandbox log entry. TimestampMS is the entry's time in Unix
// milliseconds, the unit of the logs cursor.
type LogOut struct {
	Timestamp   string            `json:"timestamp"`
	TimestampMS int64             `json:"timestamp_ms"`
	Level       string            `json:"level,omitempty"`
	Message     string            `json:"message"`
	Fields      map[string]string `json:"fields,omitempty"`
}

// MetricOut is one metrics sample.
type MetricOut struct {
	Timestamp      string  `json:"timestamp"`
	CPUCount       int32   `json:"cpu_count"`
	CPUUsedPct     float64 `json:"cpu_used_pct"`
	MemUsedBytes   int64   `json:"mem_used_bytes"`
	MemTotalBytes  int64   `json:"mem_total_bytes"`
	MemCacheBytes  int64   `json:"mem_cache_bytes"`
	DiskUsedBytes  int64   `json:"disk_used_bytes"`
	DiskTotalBytes int64   `json:"disk_total_bytes"`
}

func metricOut(m Metric) MetricOut {
	return MetricOut{Timestamp: timestamp(time.Unix(m.TimestampUnix, 0)), CPUCount: m.CPUCount, CPUUsedPct: m.CPUUsedPct,
		MemUsedBytes: m.MemUsed, MemTotalBytes: m.MemTotal, MemCacheBytes: m.MemCache,
		DiskUsedBytes: m.DiskUsed, DiskTotalBytes: m.DiskTotal}
}

// sandboxHost is where a sandbox's port is reached when E2B reports no
// domain: <port>-<id>.e2b.app.
func sandboxHost(id string, domain *string) string {
	d := "e2b.app"
	if domain != nil && strings.TrimSpace(*domain) != "" {
		d = *domain
	}
	return "<port>-" + id + "." + d
}

// orZero is *p, or the zero value where E2B sent null or nothing.
func orZero[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// mapItems converts a slice, keeping nil as an empty list so outputs always
// carry a JSON array.
func mapItems[T, U any](in []T, f func(T) U) []U {
	out := make([]U, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return out
}
