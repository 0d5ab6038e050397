package oauth

import (
	"net"
	"net/url"
	"strings"
)

// canonicalURL is raw in the form two spellings of one URL share (RFC 3986
// §6.2.2 and §6.2.3): scheme and host in lower case, no default port, and
// an empty path written "/"; it is "" for what cannot be a resource
// indicator (RFC 8707 §2: an absolute URI without a fragment). Paths are
// compared as they are: "/mcp/" is not "/mcp".
func canonicalURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.User != nil || u.Fragment != "" || strings.Contains(raw, "#") {
		return ""
	}
	u.Scheme = strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	u.Host = host
	if port != "" {
		u.Host = net.JoinHostPort(strings.Trim(host, "[]"), port)
	}
	if u.Path == "" {
		u.Path, u.RawPath = "/", ""
	}
	return u.String()
}

// resourceOf returns this server's spelling of a requested resource
// indicator, or "" when it names none of its resources. The gateway is one
// resource under two identifiers: its MCP endpoint, and the path-less one
// that the path-less metadata document describes (RFC 9728 §3.3), which a
// client that reads that document asks for.
func (s *Server) resourceOf(requested string) string {
	c := canonicalURL(requested)
	if c == "" {
		return ""
	}
	for _, own := range []string{s.resource, s.issuer} {
		if c == canonicalURL(own) {
			return own
		}
	}
	return ""
}

// ownsResource reports whether a grant's resource is one of this server's:
// a grant made by another gateway on the same database (another
// PUBLIC_URL) is not, and none of its tokens is served here.
func (s *Server) ownsResource(grantResource string) bool {
	return grantResource != "" && s.resourceOf(grantResource) == grantResource
}
