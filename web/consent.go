package web

import (
	"net/http"

	"github.com/mcpgate/mcpgate"
)

// RenderConsent shows the authorization server's consent page: which app
// asks, where the browser goes next, the workspace and access to choose.
// The caller (internal/oauth) has set the security headers.
func (h *handler) RenderConsent(w http.ResponseWriter, r *http.Request, p mcpgate.ConsentPage) {
	h.render(w, r, http.StatusOK, "consent", h.newView(r, "Allow "+p.Client.Name+"?", "", p))
}

// RenderError shows an error page for a request to the authorization
// server that cannot be sent back to its app.
func (h *handler) RenderError(w http.ResponseWriter, r *http.Request, status int, heading, message string) {
	h.renderError(w, r, status, heading, message)
}
