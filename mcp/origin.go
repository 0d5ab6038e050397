package mcp

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

// OriginOf returns the origin (scheme://host[:port], lower case) of an
// absolute http or https URL, or "" when it is not one.
func OriginOf(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return ""
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

var errOrigin = mcpgate.Errorf(mcpgate.EForbidden,
	"this origin may not call the MCP endpoint; an operator can allow it with ALLOWED_ORIGINS")

// checkOrigin refuses a browser request from an origin other than the
// gateway's own (PUBLIC_URL) or one listed in AllowedOrigins, as the MCP
// transport requires (403): otherwise any web page a person visits could
// drive the endpoint with whatever credential the browser holds, or reach a
// gateway on a private network (DNS rebinding). Requests without an Origin
// header (native clients, servers) are not browsers' and stay accepted.
func (g *Gateway) checkOrigin(w http.ResponseWriter, r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	if got := OriginOf(o); got != "" && g.origins[got] {
		return true
	}
	g.log.InfoContext(r.Context(), "MCP request from a refused origin", "origin", o)
	httpx.WriteError(w, r, g.log, errOrigin)
	return false
}

// allowedOrigins is the set checkOrigin accepts.
func allowedOrigins(publicURL string, extra []string) map[string]bool {
	m := map[string]bool{}
	for _, o := range append([]string{publicURL}, extra...) {
		if v := OriginOf(o); v != "" {
			m[v] = true
		}
	}
	return m
}
