package web

import (
	"strings"

	"github.com/mcpgate/mcpgate"
)

// The dashboard names no upstream: every word about one comes from the
// registered connectors' descriptions of themselves (mcpgate.ConnectorInfo,
// built by connectors.Info), so a second connector changes no line here.

// upstream names the registered connectors' upstreams (their Titles), for the
// pages' general text.
func (h *handler) upstream() string {
	return titles(h.svc.Resources.Connectors())
}

// upstreamThings names them with what they manage (Title and Plural).
func (h *handler) upstreamThings() string {
	var parts []string
	for _, c := range h.svc.Resources.Connectors() {
		parts = append(parts, strings.TrimSpace(c.Title+" "+c.Plural))
	}
	return strings.Join(parts, " and ")
}

// connectionsTitle is the connections page's name: the one connector's
// (its Title and "connection"), or "Connections" for several.
func (h *handler) connectionsTitle() string {
	if cs := h.svc.Resources.Connectors(); len(cs) == 1 {
		return titles(cs) + " connection"
	}
	return "Connections"
}

func titles(cs []mcpgate.ConnectorInfo) string {
	names := make([]string, 0, len(cs))
	for _, c := range cs {
		names = append(names, c.Title)
	}
	if len(names) == 0 {
		return "the upstream"
	}
	return strings.Join(names, " and ")
}

// guardrailLabels words the workspace's guardrail settings (one set for the
// workspace) as the connector that enforces them describes them; without
// one, in general terms.
func (h *handler) guardrailLabels() mcpgate.GuardrailLabels {
	for _, c := range h.svc.Resources.Connectors() {
		if c.Guardrails != (mcpgate.GuardrailLabels{}) {
			return c.Guardrails
		}
	}
	return mcpgate.GuardrailLabels{Intro: "Limits on what AI clients may start or keep running.",
		MaxTimeout: "Longest timeout (seconds)", MaxRunning: "Most running at once", AllowedTemplates: "Allowed templates"}
}
