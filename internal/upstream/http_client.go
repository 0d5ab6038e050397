package upstream

import "net/http"

// HTTPClient returns an HTTP client that dials as the hop does (every
// address checked against the policy, no proxy, no redirects, plain http
// only to the private networks), for the exchanges around a session that
// are not MCP: an upstream's OAuth metadata, registration and token
// requests (internal/upstreamauth). closeIdle releases its connections.
func (n *Network) HTTPClient() (client *http.Client, closeIdle func()) {
	return n.httpClient()
}
