package testutil

import "net/http"

// BearerTransport sends Key as a bearer token through Base (by default
// http.DefaultTransport): how an MCP client presents its key.
type BearerTransport struct {
	Key  string
	Base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (b BearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Key)
	if b.Base == nil {
		return http.DefaultTransport.RoundTrip(r)
	}
	return b.Base.RoundTrip(r)
}
