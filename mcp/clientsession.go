package mcp

// Client sessions on a server's endpoint, on the protocols before
// 2026-07-28. The endpoint stays stateless, so any replica answers: the
// session id it gives a client on every initialize is sealed (HMAC under
// the confirmation secret, its own domain) and binds the workspace, the
// credential, the person, the server, a random id, when it was issued and
// the capabilities the client declared (the only place a 2025 client says
// which requests it answers: streamrelay.go reads them). Every later
// request's id is checked against the caller and the server. On a server
// of client scope (one that keeps state per session) the random id joins
// the key of the gateway's sessions with the server, so each client has
// sessions of its own; on any other server it keys nothing (the upstream
// sessions stay the person's) and only its capabilities are read.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
)

const (
	clientSessionPrefix = "mcs1."
	// clientSessionTTL bounds a client session: past it the client is
	// told the session is gone and initializes again.
	clientSessionTTL = 24 * time.Hour
	maxClientSession = 1024
)

// clientSessionClaims is the sealed content of a client session id.
type clientSessionClaims struct {
	Workspace  string `json:"w"`
	Credential string `json:"c"`
	User       string `json:"u"`
	Server     string `json:"s"`
	ID         string `json:"i"`
	Issued     int64  `json:"t"`
	// Caps are the client's declared capabilities; ids issued before
	// they were sealed in have none (zero capabilities), and stay valid.
	Caps *sessionCaps `json:"p,omitempty"`
}

// sessionCaps are the client capabilities a session id carries, in short.
type sessionCaps struct {
	Sampling        bool `json:"s,omitempty"`
	SamplingTools   bool `json:"st,omitempty"`
	ElicitationForm bool `json:"ef,omitempty"`
	ElicitationURL  bool `json:"eu,omitempty"`
	Roots           bool `json:"r,omitempty"`
}

func (c *sessionCaps) caps() mcpgate.ClientCapabilities {
	if c == nil {
		return mcpgate.ClientCapabilities{}
	}
	return mcpgate.ClientCapabilities{Sampling: c.Sampling, SamplingTools: c.SamplingTools,
		ElicitationForm: c.ElicitationForm, ElicitationURL: c.ElicitationURL, Roots: c.Roots}
}

// parseClientCapabilities reads a client's capabilities object as the
// protocol writes it (initialize's params.capabilities, 2026-07-28's
// _meta): sampling (and its tools), elicitation (form and url; an
// elicitation with neither mode has form, as the spec says) and roots.
func parseClientCapabilities(raw json.RawMessage) mcpgate.ClientCapabilities {
	var c struct {
		Sampling *struct {
			Tools json.RawMessage `json:"tools"`
		} `json:"sampling"`
		Elicitation *struct {
			Form json.RawMessage `json:"form"`
			URL  json.RawMessage `json:"url"`
		} `json:"elicitation"`
		Roots json.RawMessage `json:"roots"`
	}
	if json.Unmarshal(raw, &c) != nil {
		return mcpgate.ClientCapabilities{}
	}
	present := func(m json.RawMessage) bool { return len(m) > 0 && string(m) != "null" }
	var out mcpgate.ClientCapabilities
	if c.Sampling != nil {
		out.Sampling, out.SamplingTools = true, present(c.Sampling.Tools)
	}
	if c.Elicitation != nil {
		out.ElicitationForm, out.ElicitationURL = present(c.Elicitation.Form), present(c.Elicitation.URL)
		if !out.ElicitationForm && !out.ElicitationURL {
			out.ElicitationForm = true
		}
	}
	out.Roots = present(c.Roots)
	return out
}

// initializeCapabilities reads the capabilities of an initialize body.
func initializeCapabilities(body []byte) mcpgate.ClientCapabilities {
	var m struct {
		Params struct {
			Capabilities json.RawMessage `json:"capabilities"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		return mcpgate.ClientCapabilities{}
	}
	return parseClientCapabilities(m.Params.Capabilities)
}

// streamSession is what a request's valid session id says: its random id
// ("" for a request without one) and the client's capabilities.
type streamSession struct {
	id   string
	caps mcpgate.ClientCapabilities
	// expires is when the id stops being valid.
	expires time.Time
}

type streamSessionKey struct{}

func withStreamSession(ctx context.Context, s streamSession) context.Context {
	return context.WithValue(ctx, streamSessionKey{}, s)
}

func streamSessionFrom(ctx context.Context) streamSession {
	s, _ := ctx.Value(streamSessionKey{}).(streamSession)
	return s
}

func (g *Gateway) clientSessionMAC(payload []byte) []byte {
	m := hmac.New(sha256.New, g.opts.ConfirmationSecret)
	m.Write([]byte("mcpgate client session v1\x00"))
	m.Write(payload)
	return m.Sum(nil)
}

// mintClientSession issues a session id of a on server's endpoint, with
// no capabilities.
func (g *Gateway) mintClientSession(a *mcpgate.Actor, server string) string {
	return g.mintSession(a, server, mcpgate.ClientCapabilities{})
}

// mintSession issues a session id of a on server's endpoint for a client
// that declared caps.
func (g *Gateway) mintSession(a *mcpgate.Actor, server string, caps mcpgate.ClientCapabilities) string {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	enc := base64.RawURLEncoding
	var sc *sessionCaps
	if caps != (mcpgate.ClientCapabilities{}) {
		sc = &sessionCaps{Sampling: caps.Sampling, SamplingTools: caps.SamplingTools,
			ElicitationForm: caps.ElicitationForm, ElicitationURL: caps.ElicitationURL, Roots: caps.Roots}
	}
	payload, _ := json.Marshal(clientSessionClaims{Workspace: a.WorkspaceID, Credential: a.CredentialID(), User: a.UserID,
		Server: server, ID: enc.EncodeToString(id), Issued: g.now().Unix(), Caps: sc})
	return clientSessionPrefix + enc.EncodeToString(payload) + "." + enc.EncodeToString(g.clientSessionMAC(payload))
}

// verifySession reads a session id issued to a on server's endpoint and
// not expired; ok is false for any other.
func (g *Gateway) verifySession(token string, a *mcpgate.Actor, server string) (streamSession, bool) {
	body, ok := strings.CutPrefix(token, clientSessionPrefix)
	if !ok || len(token) > maxClientSession {
		return streamSession{}, false
	}
	p64, m64, ok := strings.Cut(body, ".")
	if !ok {
		return streamSession{}, false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.DecodeString(m64)
	if err1 != nil || err2 != nil || !hmac.Equal(sig, g.clientSessionMAC(payload)) {
		return streamSession{}, false
	}
	var c clientSessionClaims
	if json.Unmarshal(payload, &c) != nil || c.ID == "" {
		return streamSession{}, false
	}
	issued := time.Unix(c.Issued, 0)
	if c.Workspace != a.WorkspaceID || c.Credential != a.CredentialID() || c.User != a.UserID || c.Server != server ||
		g.now().Sub(issued) > clientSessionTTL || issued.After(g.now().Add(time.Minute)) {
		return streamSession{}, false
	}
	return streamSession{id: c.ID, caps: c.Caps.caps(), expires: issued.Add(clientSessionTTL)}, true
}

// clientSession runs the client session of a request to a server's
// endpoint on protocols before 2026-07-28 (which has no sessions): an
// initialize gets a new session id carrying the client's capabilities; a
// request with a valid id goes on with it in its context (and, on a
// server of client scope, as that client session); one with an invalid,
// expired or foreign id is answered 404, so that the client initializes
// again (the spec's answer for a session the server does not know); a
// DELETE with a valid id is answered 204, ends the id (sessionend.go:
// later requests with it are answered 404, on every replica told) and, on
// a server of client scope, closes the gateway's sessions with the server
// that served it. A
// request without an id goes on with no capabilities known (lenient: a
// client may not send the id back) and, on a server of client scope, as
// on a server of person scope. It reports whether the request goes on.
func (g *Gateway) clientSession(ctx context.Context, w http.ResponseWriter, r *http.Request, a *mcpgate.Actor,
	ep *mcpgate.ServerEndpoint, eps mcpgate.ServerEndpointService, body []byte) (context.Context, bool) {
	if r.Header.Get("Mcp-Protocol-Version") == newProtocol {
		return ctx, true
	}
	if r.Method == http.MethodPost && isInitialize(body) {
		w.Header().Set("Mcp-Session-Id", g.mintSession(a, ep.Server, initializeCapabilities(body)))
		return ctx, true
	}
	token := r.Header.Get("Mcp-Session-Id")
	if token == "" {
		return ctx, true
	}
	s, ok := g.verifySession(token, a, ep.Server)
	if !ok || g.ended.has(s.id) {
		writeSessionNotFound(w)
		return ctx, false
	}
	if r.Method == http.MethodDelete {
		if ender, ok := eps.(mcpgate.ClientSessionEnder); ok && ep.ClientSessions {
			if err := ender.EndClientSession(ctx, a, ep.Server, s.id); err != nil {
				g.log.WarnContext(ctx, "end client session", "workspace_id", a.WorkspaceID, "err", err)
			}
		}
		g.endSession(ctx, a, s)
		w.WriteHeader(http.StatusNoContent)
		return ctx, false
	}
	ctx = withStreamSession(ctx, s)
	if !ep.ClientSessions {
		return ctx, true
	}
	return mcpgate.NewContextWithClientSession(ctx, mcpgate.ClientSession{Server: ep.Server, ID: s.id}), true
}

func isInitialize(body []byte) bool {
	var m struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(body, &m) == nil && m.Method == "initialize"
}

func writeSessionNotFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32001, "message": "session not found: initialize again"}})
}
