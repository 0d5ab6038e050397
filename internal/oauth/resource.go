package oauth

import (
	"net"
	"net/url"
	"strings"

	"github.com/mcpgate/mcpgate/internal/upstream"
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

// identifiers are the gateway at publicURL's own identifiers as a
// resource: its MCP endpoint, and the path-less one that the path-less
// metadata document describes (RFC 9728 §3.3), which a client that reads
// that document asks for. The issuer is the path-less one. Each upstream
// server's own endpoint, <resource>/<server>, is a resource too
// (serverResource).
func identifiers(publicURL string) (resource, issuer string) {
	issuer = strings.TrimRight(publicURL, "/")
	return issuer + "/mcp", issuer
}

// serverResource returns the identifier of the server endpoint named by
// a canonical URL below the MCP endpoint (resource + "/<server>"), or ""
// when the rest is not a well-formed server name. Any well-formed name is
// one: whether a workspace has a server of that name is not the
// authorization server's to say (a token for a name the workspace lacks
// reaches that endpoint's one not-found), and answering differently would
// tell a stranger which names some workspace uses.
func serverResource(canonical, resource string) string {
	prefix := canonicalURL(resource) + "/"
	name, ok := strings.CutPrefix(canonical, prefix)
	if !ok || upstream.ValidateServerName(name) != nil {
		return ""
	}
	return resource + "/" + name
}

// resourceFor returns this gateway's spelling of a requested resource
// indicator (the MCP endpoint, the path-less identifier or a server's
// endpoint), or "" when it names none of them.
func resourceFor(requested, resource, issuer string) string {
	c := canonicalURL(requested)
	switch {
	case c == "":
		return ""
	case c == canonicalURL(resource):
		return resource
	case c == canonicalURL(issuer):
		return issuer
	}
	return serverResource(c, resource)
}

// resourceOf returns this server's spelling of a requested resource
// indicator, or "" when it names none of its resources (identifiers).
func (s *Server) resourceOf(requested string) string {
	return resourceFor(requested, s.resource, s.issuer)
}

// ownResources names this server's resources, for a refusal.
func (s *Server) ownResources() string {
	return s.resource + " and each upstream server's endpoint " + s.resource + "/<server>"
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
	return func(g string) bool { return g != "" && resourceFor(g, resource, issuer) == g }
}

// TokenFor returns the audience rule of the gateway at publicURL, for the
// MCP endpoints (mcp.Options.TokenFor): a token is for the resource its
// grant names (RFC 8707), so one whose grant names the MCP endpoint
// (<PUBLIC_URL>/mcp) is served there alone, and one whose grant names a
// server's endpoint (<PUBLIC_URL>/mcp/<server>) at that endpoint alone,
// never at another server's nor at /mcp (whose tools are all the
// workspace's). The path-less identifier names the whole gateway, so a
// token for it is served at every endpoint: it is what a client gets
// that found only the path-less metadata document. path is the endpoint's
// path, /mcp or /mcp/<server>.
func TokenFor(publicURL string) func(grantResource, path string) bool {
	resource, issuer := identifiers(publicURL)
	return func(g, path string) bool {
		return g == issuer || (g != "" && g == issuer+path && resourceFor(g, resource, issuer) == g)
	}
}
