package e2b

import (
	"encoding/json"
	"time"
)

// The wire types below mirror E2B's OpenAPI schemas (field names exactly as
// E2B spells them). Fields that carry secrets are deliberately absent or typed
// Withheld, so a secret E2B sends is dropped while decoding and can reach
// neither a tool output nor a log line. internal/e2bsim declares its own
// copies on purpose: it models E2B's server independently (secrets sent,
// omitempty as infra does), so the contract test compares two readings of
// E2B, not one type with itself.

// Withheld stands in for a secret value E2B returns. Decoding discards the
// value and records only that one was present; encoding renders
// "[redacted]".
type Withheld struct{ present bool }

// UnmarshalJSON implements json.Unmarshaler. It keeps nothing of the value.
func (w *Withheld) UnmarshalJSON(b []byte) error {
	w.present = string(b) != "null"
	return nil
}

// MarshalJSON implements json.Marshaler.
func (w Withheld) MarshalJSON() ([]byte, error) { return []byte(`"[redacted]"`), nil }

// Present reports whether E2B sent a (non-null) value.
func (w Withheld) Present() bool { return w.present }

// DefaultTemplate is one entry of the dashboard API's GET /templates/defaults.
// Its field names differ from Template's (vcpu, ramMb, totalDiskSizeMb).
type DefaultTemplate struct {
	ID              string          `json:"id"`
	Aliases         []TemplateAlias `json:"aliases"`
	BuildID         string          `json:"buildId"`
	RAMMB           int64           `json:"ramMb"`
	VCPU            int64           `json:"vcpu"`
	TotalDiskSizeMB *int64          `json:"totalDiskSizeMb"`
	EnvdVersion     *string         `json:"envdVersion"`
	CreatedAt       time.Time       `json:"createdAt"`
	Public          bool            `json:"public"`
	BuildCount      int32           `json:"buildCount"`
	SpawnCount      int64           `json:"spawnCount"`
}

// TemplateAlias is a default template's alias and its namespace, if any.
type TemplateAlias struct {
	Alias     string  `json:"alias"`
	Namespace *string `json:"namespace"`
}

// templateFields are the fields E2B's Template and TemplateWithBuilds share.
type templateFields struct {
	TemplateID    string     `json:"templateID"`
	Public        bool       `json:"public"`
	Aliases       []string   `json:"aliases"`
	Names         []string   `json:"names"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
	LastSpawnedAt *time.Time `json:"lastSpawnedAt"`
	SpawnCount    int64      `json:"spawnCount"`
}

// Template is a team template as GET /v2/templates returns it. BuildID is the
// zero UUID, and CPUCount and MemoryMB are 0, when no build is ready.
type Template struct {
	templateFields
	BuildID     string `json:"buildID"`
	CPUCount    int32  `json:"cpuCount"`
	MemoryMB    int32  `json:"memoryMB"`
	DiskSizeMB  int32  `json:"diskSizeMB"`
	BuildCount  int32  `json:"buildCount"`
	EnvdVersion string `json:"envdVersion"`
	BuildStatus string `json:"buildStatus"`
}

// TemplateWithBuilds is GET /templates/{templateID}: one page of a template's
// builds.
type TemplateWithBuilds struct {
	templateFields
	Builds []TemplateBuild `json:"builds"`
}

// TemplateBuild is one build of a template.
type TemplateBuild struct {
	BuildID     string     `json:"buildID"`
	Status      string     `json:"status"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	FinishedAt  *time.Time `json:"finishedAt"`
	CPUCount    int32      `json:"cpuCount"`
	MemoryMB    int32      `json:"memoryMB"`
	DiskSizeMB  *int32     `json:"diskSizeMB"`
	EnvdVersion *string    `json:"envdVersion"`
}

// NewSandbox is a sandbox to create (CreateSandbox sends it to POST
// /v2/sandboxes when Secure, else POST /sandboxes). The servers' defaults
// differ from the SDKs' (no template; v1 15 s and not secure), so callers set
// every field they rely on. Note the snake_case allow_internet_access: that is E2B's spelling.
type NewSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             int32             `json:"timeout"`
	AutoPause           bool              `json:"autoPause,omitempty"`
	Secure              bool              `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
	// Network is sent as given. It may carry secrets (rule headers, proxy
	// password), so it must never be logged.
	Network json.RawMessage `json:"network,omitempty"`
}

// sandboxV2 is NewSandboxV2, the body of POST /v2/sandboxes: NewSandbox
// without secure, which that route always is (e2b 2.51.0 dist/index.d.ts).
// The outer Secure, never set, hides the embedded one from encoding/json
// (the shallower field wins) and is omitted.
type sandboxV2 struct {
	NewSandbox
	Secure *bool `json:"secure,omitempty"`
}

// Sandbox is what create and connect return. The envd and traffic access
// tokens E2B sends alongside are not decoded.
type Sandbox struct {
	TemplateID  string  `json:"templateID"`
	SandboxID   string  `json:"sandboxID"`
	Alias       string  `json:"alias"`
	EnvdVersion string  `json:"envdVersion"`
	Domain      *string `json:"domain"`
	// Resumed is true when connect resumed a paused sandbox (201) rather
	// than extending a running one (200). It is not part of E2B's body.
	Resumed bool `json:"-"`
}

// ListedSandbox is one entry of GET /v2/sandboxes. For a paused sandbox EndAt
// is the time it was paused, not an expiry.
type ListedSandbox struct {
	TemplateID   string            `json:"templateID"`
	Alias        string            `json:"alias"`
	SandboxID    string            `json:"sandboxID"`
	StartedAt    time.Time         `json:"startedAt"`
	EndAt        time.Time         `json:"endAt"`
	CPUCount     int32             `json:"cpuCount"`
	MemoryMB     int32             `json:"memoryMB"`
	DiskSizeMB   int32             `json:"diskSizeMB"`
	Metadata     map[string]string `json:"metadata"`
	State        string            `json:"state"`
	EnvdVersion  string            `json:"envdVersion"`
	VolumeMounts []VolumeMount     `json:"volumeMounts"`
}

// VolumeMount is a volume mounted into a sandbox.
type VolumeMount struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// SandboxDetail is GET /sandboxes/{id}: a ListedSandbox plus network and
// lifecycle. envdAccessToken is not decoded.
type SandboxDetail struct {
	ListedSandbox
	AllowInternetAccess *bool          `json:"allowInternetAccess"`
	Domain              *string        `json:"domain"`
	Network             *NetworkConfig `json:"network"`
	Lifecycle           *Lifecycle     `json:"lifecycle"`
}

// NetworkConfig is a sandbox's network configuration. Rule header values and
// proxy credentials are Withheld.
type NetworkConfig struct {
	AllowPublicTraffic *bool                    `json:"allowPublicTraffic"`
	AllowOut           []string                 `json:"allowOut"`
	DenyOut            []string                 `json:"denyOut"`
	EgressProxy        *EgressProxy             `json:"egressProxy"`
	MaskRequestHost    *string                  `json:"maskRequestHost"`
	Rules              map[string][]NetworkRule `json:"rules"`
}

// EgressProxy is a sandbox's SOCKS5 egress proxy.
type EgressProxy struct {
	Address  string   `json:"address"`
	Username Withheld `json:"username"`
	Password Withheld `json:"password"`
}

// NetworkRule transforms egress requests to one domain.
type NetworkRule struct {
	Transform *struct {
		Headers map[string]Withheld `json:"headers"`
	} `json:"transform"`
}

// Lifecycle is what happens to a sandbox at its timeout.
type Lifecycle struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

// LogEntry is one structured sandbox log line.
type LogEntry struct {
	Timestamp time.Time         `json:"timestamp"`
	Level     string            `json:"level"`
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields"`
}

// Metric is one sample of a sandbox's resource use. TimestampUnix is in
// seconds.
type Metric struct {
	TimestampUnix int64   `json:"timestampUnix"`
	CPUCount      int32   `json:"cpuCount"`
	CPUUsedPct    float64 `json:"cpuUsedPct"`
	MemUsed       int64   `json:"memUsed"`
	MemTotal      int64   `json:"memTotal"`
	MemCache      int64   `json:"memCache"`
	DiskUsed      int64   `json:"diskUsed"`
	DiskTotal     int64   `json:"diskTotal"`
}

// Snapshot is a persistent snapshot template.
type Snapshot struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

// apiError is E2B's error body. Its message is used only after
// safeMessage has vetted it.
type apiError struct {
	Code      int    `json:"code"`
	Message   string `json:"message"`
	ErrorCode string `json:"error_code"`
}
