package mcpgate

import (
	"context"
	"slices"
	"strings"
)

// Guardrails are a workspace's limits on what AI clients may start or keep
// running, enforced by the gateway before the upstream is called. Zero
// values set no limit, which is the behaviour of a new workspace.
type Guardrails struct {
	// MaxTimeoutSeconds is the longest lifetime a call may ask for
	// (creating, extending or resuming); 0 leaves the upstream's limit.
	MaxTimeoutSeconds int `json:"max_timeout_seconds"`
	// MaxRunning is the most resources (sandboxes) running at once for the
	// team beyond which the gateway refuses to start another; 0 leaves the
	// upstream's limit.
	MaxRunning int `json:"max_running"`
	// AllowedTemplates, when not empty, are the only templates a call may
	// start from.
	AllowedTemplates []string `json:"allowed_templates"`
}

// Normalize trims, dedupes and checks the guardrails.
func (g Guardrails) Normalize() (Guardrails, error) {
	if g.MaxTimeoutSeconds < 0 || g.MaxTimeoutSeconds > 30*86400 {
		return g, Errorf(EInvalid, "max_timeout_seconds must be 0 (no limit) to 2592000")
	}
	if g.MaxRunning < 0 || g.MaxRunning > 100000 {
		return g, Errorf(EInvalid, "max_running must be 0 (no limit) to 100000")
	}
	out := Guardrails{MaxTimeoutSeconds: g.MaxTimeoutSeconds, MaxRunning: g.MaxRunning, AllowedTemplates: []string{}}
	for _, t := range g.AllowedTemplates {
		t = strings.TrimSpace(t)
		if t == "" || slices.Contains(out.AllowedTemplates, t) {
			continue
		}
		if len(t) > 256 || strings.ContainsAny(t, " \t\r\n") {
			return g, Errorf(EInvalid, "each allowed template must be a template ID or name without spaces, at most 256 characters")
		}
		out.AllowedTemplates = append(out.AllowedTemplates, t)
	}
	if len(out.AllowedTemplates) > 100 {
		return g, Errorf(EInvalid, "at most 100 allowed templates")
	}
	return out, nil
}

// GuardrailService reads and sets a workspace's guardrails.
type GuardrailService interface {
	// Guardrails returns the workspace's guardrails (any member).
	Guardrails(ctx context.Context, a *Actor) (*Guardrails, error)
	// SetGuardrails replaces them (owners and admins).
	SetGuardrails(ctx context.Context, a *Actor, g Guardrails) (*Guardrails, error)
}
