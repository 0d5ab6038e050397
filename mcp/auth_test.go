package mcp

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcpgate/mcpgate"
)

// TestPresented: the endpoint reads one credential from a request, in the
// order path, Authorization, X-API-Key, and says whether it came as a
// bearer token (the only place an access token is taken from).
func TestPresented(t *testing.T) {
	tests := []struct {
		name, path, authz, apiKey string
		want                      mcpgate.Presented
	}{
		{name: "none", path: "/mcp"},
		{name: "bearer", path: "/mcp", authz: "Bearer mcpat_x", want: mcpgate.Presented{Value: "mcpat_x", Bearer: true}},
		{name: "bearer in any case, trimmed", path: "/mcp", authz: "bEARER  k1 ", want: mcpgate.Presented{Value: "k1", Bearer: true}},
		{name: "bearer without a token", path: "/mcp", authz: "Bearer ", want: mcpgate.Presented{Bearer: true}},
		{name: "another scheme hides X-API-Key", path: "/mcp", authz: "Basic abc", apiKey: "k2"},
		{name: "scheme alone", path: "/mcp", authz: "Bearer", apiKey: "k2"},
		{name: "X-API-Key", path: "/mcp", apiKey: " k2 ", want: mcpgate.Presented{Value: "k2"}},
		{name: "connector URL before headers", path: "/c/k3/mcp", authz: "Bearer mcpat_x", apiKey: "k2",
			want: mcpgate.Presented{Value: "k3"}},
		{name: "not a connector URL", path: "/c/k3/other", apiKey: "k2", want: mcpgate.Presented{Value: "k2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, tt.path, nil)
			if tt.authz != "" {
				r.Header.Set("Authorization", tt.authz)
			}
			if tt.apiKey != "" {
				r.Header.Set("X-API-Key", tt.apiKey)
			}
			if got := presented(r); got != tt.want {
				t.Fatalf("presented() = %+v, want %+v", got, tt.want)
			}
		})
	}
	// The route's path value (the /c/{key}/mcp pattern) comes first.
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.SetPathValue("key", "k4")
	r.Header.Set("Authorization", "Bearer mcpat_x")
	if got := presented(r); got != (mcpgate.Presented{Value: "k4"}) {
		t.Fatalf("presented() with a path value = %+v, want k4 not as a bearer", got)
	}
}
