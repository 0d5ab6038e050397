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

// identifiers are the two identifiers of the gateway at publicURL as a
// resource: its MCP endpoint, and the path-less one that the path-less
// metadata document describes (RFC 9728 §3.3), which a client that reads
// that document asks for. The issuer is the path-less one.
func identifiers(publicURL string) (resource, issuer string) {
	issuer = strings.TrimRight(publicURL, "/")
	return issuer + "/mcp", issuer
}

// resourceIn returns the spelling among own of a requested resource
// indicator, or "" when it names none of them.
func resourceIn(requested string, own ...string) string {
	c := canonicalURL(requested)
	if c == "" {
		return ""
	}
	for _, o := range own {
		if c == canonicalURL(o) {
			return o
		}
	}
	return ""
}

// resourceOf returns this server's spelling of a requested resource
// indicator, or "" when it names none of its resources (identifiers).
func (s *Server) resourceOf(requested string) string {
	return resourceIn(requested, s.resource, s.issuer)
}

// ownsResource reports whether a grant's resource is one of this server's:
// a grant made by another gateway on the same database (another
// PUBLIC_URL) is not, and none of its tokens is served here.
func (s *Server) ownsResource(grantResource string) bool {
	return grantResource != "" && s.resourceOf(grantResource) == grantResource
}

// OwnsResource returns the check of the server at publicURL (New with that
// PublicURL) that a grant's resource is one of its own, for the verifier
// of access tokens (internal/auth), which must refuse a token of another
// gateway on the same database. It needs no Server, so that the verifier
// can be built before it.
func OwnsResource(publicURL string) func(grantResource string) bool {
	resource, issuer := identifiers(publicURL)
	return func(g string) bool { return g != "" && resourceIn(g, resource, issuer) == g }
}
