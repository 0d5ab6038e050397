package web

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/mcpgate/mcpgate"
)

// RenderConsent shows the authorization server's consent page: which
// gateway and app, what it asks for, where the browser goes next, the
// workspace and access to choose. The caller (internal/oauth) has set the
// security headers.
func (h *handler) RenderConsent(w http.ResponseWriter, r *http.Request, p mcpgate.ConsentPage) {
	v := h.newView(r, "Allow "+p.Client.Name+"?", "", p)
	v.Flow = true
	h.render(w, r, http.StatusOK, "consent", v)
}

// RenderError shows an error page for a request to the authorization
// server that cannot be sent back to its app.
func (h *handler) RenderError(w http.ResponseWriter, r *http.Request, status int, heading, message string) {
	h.renderError(w, r, status, heading, message)
}

// hostOf is the host of a URL, for saying which gateway a page is from.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return raw
	}
	return u.Host
}

// oauthApp names the app whose authorization request a login page leads
// back to (next), or "" when next is no authorization request.
func (h *handler) oauthApp(r *http.Request, next string) string {
	if h.opts.OAuthApp == nil || !strings.HasPrefix(next, "/oauth/authorize?") {
		return ""
	}
	u, err := url.Parse(next)
	if err != nil {
		return ""
	}
	id := u.Query().Get("client_id")
	if id == "" {
		return ""
	}
	return h.opts.OAuthApp(r.Context(), id)
}
