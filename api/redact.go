package api

import (
	"net/http"
	"path"
	"regexp"
	"strings"

	"github.com/mcpgate/mcpgate"
)

// What a secret in a URL looks like, wherever it sits and in any letter
// case, so that no spelling of a path (//c/…, /C/…, /./c/…, /x/..//c/…, a
// key pasted into another route) gets one into the log:
//   - secretSegment: the segment after /c/ (a connector URL's key, or a
//     guess at one), /invite/ or /invitations/ (an invitation token; only
//     its hash is stored, so the log must not hold it either);
//   - secretToken: any MCP key (mcpg_…) or invitation token (inv_…);
//   - jwtToken: a JWT (three base64url parts, the first a JSON object);
//   - oauthToken: the gateway's OAuth access tokens, refresh tokens and
//     codes (mcpat_, mcprt_, mcpac_), should one ever be put in a path.
var (
	secretSegment = regexp.MustCompile(`(?i)(/c/|/invite/|/invitations/)[^/?&#]*`)
	secretToken   = regexp.MustCompile(`(?i)(mcpg_|inv_)[A-Za-z0-9_\-]+`)
	oauthToken    = regexp.MustCompile(`mcp(at|rt|ac)_[A-Za-z0-9_\-]+`)
	jwtToken      = regexp.MustCompile(`eyJ[A-Za-z0-9_\-]*\.[A-Za-z0-9_\-]*\.[A-Za-z0-9_\-]*`)
)

// RedactPath returns a request path (or query) with every secret it may
// carry replaced by [redacted]; what says which kind was there is kept
// (/c/[redacted]/mcp, inv_[redacted]). It does not depend on the path being
// clean: the patterns match in any spelling of it.
func RedactPath(p string) string {
	p = secretSegment.ReplaceAllString(p, "${1}[redacted]")
	p = secretToken.ReplaceAllString(p, "${1}[redacted]")
	p = oauthToken.ReplaceAllString(p, "[redacted]")
	return jwtToken.ReplaceAllString(p, "[redacted]")
}

// canonicalConnectorPath answers 404 to a request whose path reaches the
// connector URL only after cleaning or case folding (//c/…, /C/…, /./c/…,
// /x/..//c/…, a trailing slash): such a path is no client's spelling of its
// connector URL, and serving it would mean every place that recognises a
// connector URL (log redaction, proxies, firewalls) must clean paths the
// same way.
func (s *Server) canonicalConnectorPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		cleaned := path.Clean("/" + p)
		if strings.HasPrefix(strings.ToLower(cleaned), mcpgate.ConnectorPathPrefix) &&
			(p != cleaned || !strings.HasPrefix(p, mcpgate.ConnectorPathPrefix) || r.URL.RawPath != "") {
			WriteError(w, r, s.log, mcpgate.Errorf(mcpgate.ENotFound, "not found"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
