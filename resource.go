package mcpgate

import (
	"context"
	"time"
)

// The dashboard shows what a connector manages (E2B's sandboxes) through
// these types, which the connector fills from its own read-only tools. The
// dashboard thus names no connector's tools and reads none of their output
// shapes, and what a person sees is exactly what the AI sees, under the same
// policy and audit.

// ConnectorInfo describes a connector for the dashboard.
type ConnectorInfo struct {
	// Name is the connector's id ("e2b"): its connection route's segment.
	Name string `json:"name"`
	// Title names the upstream ("E2B").
	Title string `json:"title"`
	// Singular and Plural name its resources ("sandbox", "sandboxes"); empty
	// when the dashboard cannot browse them.
	Singular string `json:"singular,omitempty"`
	Plural   string `json:"plural,omitempty"`
	// Connect tells a person how to connect it; its zero value gets a
	// generic form.
	Connect ConnectGuide `json:"connect"`
	// Guardrails names the workspace's guardrail settings in the
	// connector's terms; zero when it enforces none.
	Guardrails GuardrailLabels `json:"guardrails"`
}

// ConnectGuide is how a connector asks for its one credential, in its own
// words, so that the dashboard's connection page names no upstream.
type ConnectGuide struct {
	// Title is the call to action ("Connect your E2B team"), Summary the
	// line under it, Action the label of a link to the form.
	Title   string `json:"title"`
	Summary string `json:"summary"`
	Action  string `json:"action"`
	// Label, Placeholder and Hint are the credential field's.
	Label       string `json:"label"`
	Placeholder string `json:"placeholder,omitempty"`
	Hint        string `json:"hint,omitempty"`
	// Steps say where to find the credential, Link is the page that makes
	// it, Tip one more line of advice.
	Steps []string `json:"steps,omitempty"`
	Link  string   `json:"link,omitempty"`
	Tip   string   `json:"tip,omitempty"`
	// Demo says what differs when the upstream is a simulator (the
	// connector's DemoProbe found one); DemoCredential is a credential the
	// simulator accepts.
	Demo           string `json:"demo,omitempty"`
	DemoCredential string `json:"demo_credential,omitempty"`
}

// GuardrailLabels are the labels and hints of the Guardrails fields in a
// connector's words; an empty label hides its field.
type GuardrailLabels struct {
	// Intro says what the guardrails limit and when they are checked.
	Intro                string `json:"intro,omitempty"`
	MaxTimeout           string `json:"max_timeout,omitempty"`
	MaxTimeoutHint       string `json:"max_timeout_hint,omitempty"`
	MaxRunning           string `json:"max_running,omitempty"`
	MaxRunningHint       string `json:"max_running_hint,omitempty"`
	AllowedTemplates     string `json:"allowed_templates,omitempty"`
	AllowedTemplatesHint string `json:"allowed_templates_hint,omitempty"`
}

// Resource is one thing a connector manages, as a list row and a page
// heading show it.
type Resource struct {
	ID string
	// Kind is what it is made from, in people's words (a template's name).
	Kind  string
	State string
	// Active is set while it runs (and costs money).
	Active    bool
	StartedAt time.Time
	// EndsAt is when it ends on its own; PausedAt when it was paused. Zero
	// when not known or not applicable.
	EndsAt   time.Time
	PausedAt time.Time
	// Size is a short summary of its resources ("2 vCPU · 512 MB").
	Size string
	// Facts are the detail page's label/value pairs, in order.
	Facts  []Fact
	Labels []Label
}

// Fact is one labelled value; Code values are identifiers shown as code.
type Fact struct {
	Label, Value string
	Code         bool
}

// Label is one key=value tag of a resource (E2B's metadata).
type Label struct{ Key, Value string }

// ResourcePage is one page of a connector's resources.
type ResourcePage struct {
	Resources []Resource
	// Next is the opaque token of the next page, or "".
	Next string
	// Note is a line of context from the upstream ("E2B reports 3 running
	// in the team"), or "".
	Note string
}

// ResourceDetail is everything the detail page shows of one resource.
type ResourceDetail struct {
	Resource
	// Series are usage charts; SeriesNote says why there are none, and
	// SeriesError why they could not be read.
	Series      []Series
	SeriesNote  string
	SeriesError string
	// Logs are recent log lines, newest first; LogsError says why they
	// could not be read.
	Logs      []LogLine
	LogsError string
	// Actions are what a person may do to it from the page.
	Actions []ResourceAction
}

// Series is one usage chart: samples over time.
type Series struct {
	Title string
	// Max is the chart's top (100 for percentages, the total for memory);
	// Unit is shown beside the latest value ("of 512 MB").
	Max  float64
	Unit string
	// Format is how values read: "pct" or "bytes".
	Format string
	Points []Point
}

// Point is one sample.
type Point struct {
	T time.Time
	V float64
}

// LogLine is one log line of a resource.
type LogLine struct {
	Time    time.Time
	Level   string
	Message string
	Fields  map[string]string
}

// ResourceAction is a button on a resource's page: one tool call.
type ResourceAction struct {
	Tool  string
	Label string
	// Args are the call's fixed arguments.
	Args map[string]any
	// Choice, when set, lets the person pick one more argument.
	Choice *ActionChoice
	// Confirm, when set, is the dialog shown first; TypeToConfirm is the
	// text the person must type (an id) for an irreversible action.
	Confirm *ActionConfirm
	Primary bool
	Danger  bool
	// Leaves says the resource is gone afterwards: the page goes back to
	// the list.
	Leaves bool
	// Done is what the next page says once the action succeeded ("Sandbox
	// … was killed."); empty says nothing.
	Done string
	// Enabled is false when the workspace has the tool turned off; the
	// page then says so instead of offering it.
	Enabled bool
}

// ActionChoice is an argument picked from a list.
type ActionChoice struct {
	Arg, Label string
	Options    []ChoiceOption
	Default    any
}

// ChoiceOption is one choice.
type ChoiceOption struct {
	Value any
	Label string
}

// ActionConfirm is a confirmation dialog.
type ActionConfirm struct {
	Title, Text, Action, TypeToConfirm string
}

// ResourceService lets the dashboard browse what connectors manage, through
// their tools, under the actor's policy and audit.
type ResourceService interface {
	// Connectors lists the registered connectors.
	Connectors() []ConnectorInfo
	// Resources lists one page of a connector's resources; page is "" or a
	// ResourcePage.Next.
	Resources(ctx context.Context, a *Actor, connector, page string) (*ResourcePage, error)
	// Resource returns one resource with its usage, logs and actions.
	Resource(ctx context.Context, a *Actor, connector, id string) (*ResourceDetail, error)
}
