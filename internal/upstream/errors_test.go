package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

const (
	secretToken = "up-secret-token-0123456789"
	secretKey   = "key-9876543210-secret"
)

var secretHeaders = map[string]mcpgate.Secret{"Authorization": "Bearer " + secretToken, "X-Api-Key": secretKey}

// assertNoSecret fails when an error's text, in any format, holds a
// credential value.
func assertNoSecret(t *testing.T, err error) {
	t.Helper()
	for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err)} {
		for _, s := range []string{secretToken, secretKey} {
			if strings.Contains(text, s) {
				t.Errorf("error holds a credential: %s", text)
			}
		}
	}
	var e *Error
	if errors.As(err, &e) && (strings.Contains(e.WWWAuthenticate, secretToken) || strings.Contains(e.WWWAuthenticate, secretKey)) {
		t.Errorf("WWWAuthenticate holds a credential: %s", e.WWWAuthenticate)
	}
}

func discoverErr(t *testing.T, p *Pool[string], target Target) *Error {
	t.Helper()
	_, err := p.Discover(context.Background(), target)
	if err == nil {
		t.Fatal("Discover() succeeded")
	}
	assertNoSecret(t, err)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("Discover() err = %v (%T), want *Error", err, err)
	}
	return e
}

// echo answers with the request's credential headers in its body and its
// challenge, as a careless upstream might.
func echo(status int, contentType string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="up", error="invalid_token", error_description="`+r.Header.Get("X-Api-Key")+`"`)
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		body := `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"bad ` + r.Header.Get("Authorization") + `"}}`
		if contentType != "application/json" {
			body = "<html>" + r.Header.Get("Authorization") + "</html>"
		}
		_, _ = io.WriteString(w, body)
	})
}

func TestDiscover_ErrorsSayWhy(t *testing.T) {
	noLeaks(t)
	p := newPool(t, Options{})
	for _, tt := range []struct {
		name      string
		handler   http.Handler
		kind      ErrorKind
		status    int
		challenge bool
	}{
		{name: "401", handler: echo(http.StatusUnauthorized, "application/json"), kind: KindUnauthorized, status: 401, challenge: true},
		{name: "403", handler: echo(http.StatusForbidden, "text/plain"), kind: KindForbidden, status: 403, challenge: true},
		{name: "404 page", handler: http.NotFoundHandler(), kind: KindNotMCP, status: 404},
		{name: "a web page", handler: echo(http.StatusOK, "text/html"), kind: KindNotMCP, status: 200},
		{name: "JSON that is not JSON-RPC", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"hello":"world"}`)
		}), kind: KindNotMCP, status: 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := httptest.NewServer(tt.handler)
			defer ts.Close()
			e := discoverErr(t, p, Target{URL: ts.URL, Headers: secretHeaders})
			if e.Kind != tt.kind || e.Status != tt.status {
				t.Errorf("err = %v (kind %s, status %d), want %s %d", e, e.Kind, e.Status, tt.kind, tt.status)
			}
			if tt.challenge && !strings.Contains(e.WWWAuthenticate, `error="invalid_token"`) {
				t.Errorf("WWWAuthenticate = %q, want the upstream's challenge", e.WWWAuthenticate)
			}
		})
	}
}

func TestDiscover_TLSUnreachableRefused(t *testing.T) {
	noLeaks(t)
	tlsServer := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsServer.Close()
	p := newPool(t, Options{}) // loopback allowed, but no roots for the test CA
	if e := discoverErr(t, p, Target{URL: tlsServer.URL, Headers: secretHeaders}); e.Kind != KindTLS {
		t.Errorf("untrusted certificate: kind %s (%v), want tls", e.Kind, e)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/mcp"
	l.Close()
	if e := discoverErr(t, p, Target{URL: closed, Headers: secretHeaders}); e.Kind != KindUnreachable {
		t.Errorf("closed port: kind %s (%v), want unreachable", e.Kind, e)
	}

	strict := newPool(t, Options{Network: Network{Private: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Public: publicStandIn}})
	if e := discoverErr(t, strict, Target{URL: tlsServer.URL, Headers: secretHeaders}); e.Kind != KindRefused {
		t.Errorf("loopback not listed: kind %s (%v), want refused", e.Kind, e)
	}
	if e := discoverErr(t, New[string](Options{}), Target{URL: "http://example.com/mcp"}); e.Kind != KindRefused {
		t.Errorf("http without private networks: kind %s, want refused", e.Kind)
	}
	if e := discoverErr(t, p, Target{URL: tlsServer.URL, Headers: map[string]mcpgate.Secret{"Mcp-Session-Id": "x"}}); e.Kind != KindRefused {
		t.Errorf("a protocol header as credential: kind %s, want refused", e.Kind)
	}
}

// TestDiscover_ProtocolVersionMismatch: a server that answers initialize
// with a version the gateway does not speak is refused, saying so.
func TestDiscover_ProtocolVersionMismatch(t *testing.T) {
	noLeaks(t)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		switch req.Method {
		case "initialize":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"1999-01-01","capabilities":{},"serverInfo":{"name":"old","version":"0"}}}`, req.ID)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, req.ID)
		}
	}))
	defer ts.Close()
	e := discoverErr(t, newPool(t, Options{}), Target{URL: ts.URL, Headers: secretHeaders})
	if e.Kind != KindProtocolVersion || !strings.Contains(e.Message, "1999-01-01") {
		t.Errorf("err = %v (kind %s), want protocol_version naming the server's version", e, e.Kind)
	}
}

// TestCall_RPCErrorTyped: the upstream's JSON-RPC error to tools/call comes
// back as *RPCError with its code, and without the credential it echoed.
func TestCall_RPCErrorTyped(t *testing.T) {
	noLeaks(t)
	s := mcp.NewServer(&mcp.Implementation{Name: "rpc", Version: "v1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echoauth", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32042, Message: "refused for " + req.Extra.Header.Get("Authorization")}
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close) // after the pool's Close, which ends the server's session
	p := newPool(t, Options{})
	target := Target{URL: ts.URL, Headers: secretHeaders}
	_, err := p.Call(context.Background(), "k", target, CallRequest{Tool: "echoauth"})
	var rpcErr *RPCError
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32042 || rpcErr.Message != "refused for [redacted]" {
		t.Fatalf("Call() err = %v, want *RPCError -32042 with the credential replaced", err)
	}
	assertNoSecret(t, err)
	if mcpgate.ErrorCode(err) != mcpgate.EUpstream {
		t.Errorf("ErrorCode = %v, want upstream", mcpgate.ErrorCode(err))
	}
	_, err = p.Call(context.Background(), "k", target, CallRequest{Tool: "no-such-tool"})
	if !errors.As(err, &rpcErr) {
		t.Errorf("unknown tool err = %v, want *RPCError", err)
	}
}

// TestRedactor_InJSON: the server's credential is replaced in JSON text
// (relayed params, log data) also where JSON escapes some of its
// characters, and in decoded text.
func TestRedactor_InJSON(t *testing.T) {
	const secret = `tok&en"with\back<slash>`
	redact := Redactor(Target{Headers: map[string]mcpgate.Secret{"Authorization": "Bearer " + secret}})
	params, _ := json.Marshal(map[string]string{"message": "my key is " + secret})
	out := redact(string(params))
	var back map[string]string
	if err := json.Unmarshal([]byte(out), &back); err != nil || strings.Contains(back["message"], "tok&en") {
		t.Fatalf("redacted params %s (%v): want valid JSON without the credential", out, err)
	}
	if got := redact("my key is " + secret); strings.Contains(got, "tok&en") {
		t.Fatalf("redacted message %q still holds the credential", got)
	}
}
