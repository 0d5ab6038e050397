package mcp

// Client sessions on the endpoint of a server of client scope (one that
// keeps state per session). The endpoint stays stateless, so any replica
// answers: the session id it gives a client on initialize is sealed
// (HMAC under the confirmation secret, its own domain) and binds the
// workspace, the credential, the person, the server, a random id and when
// it was issued; every later request's id is checked against the caller
// and the server, and the random id joins the key of the gateway's
// sessions with the server, so each client has sessions of its own.

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
}

func (g *Gateway) clientSessionMAC(payload []byte) []byte {
	m := hmac.New(sha256.New, g.opts.ConfirmationSecret)
	m.Write([]byte("mcpgate client session v1\x00"))
	m.Write(payload)
	return m.Sum(nil)
}

// mintClientSession issues a session id of a on server's endpoint.
func (g *Gateway) mintClientSession(a *mcpgate.Actor, server string) string {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	enc := base64.RawURLEncoding
	payload, _ := json.Marshal(clientSessionClaims{Workspace: a.WorkspaceID, Credential: a.CredentialID(), User: a.UserID,
		Server: server, ID: enc.EncodeToString(id), Issued: g.now().Unix()})
	return clientSessionPrefix + enc.EncodeToString(payload) + "." + enc.EncodeToString(g.clientSessionMAC(payload))
}

// verifyClientSession returns the random id of a session id issued to a
// on server's endpoint and not expired; ok is false for any other.
func (g *Gateway) verifyClientSession(token string, a *mcpgate.Actor, server string) (string, bool) {
	body, ok := strings.CutPrefix(token, clientSessionPrefix)
	if !ok || len(token) > maxClientSession {
		return "", false
	}
	p64, m64, ok := strings.Cut(body, ".")
	if !ok {
		return "", false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.DecodeString(m64)
	if err1 != nil || err2 != nil || !hmac.Equal(sig, g.clientSessionMAC(payload)) {
		return "", false
	}
	var c clientSessionClaims
	if json.Unmarshal(payload, &c) != nil || c.ID == "" {
		return "", false
	}
	issued := time.Unix(c.Issued, 0)
	if c.Workspace != a.WorkspaceID || c.Credential != a.CredentialID() || c.User != a.UserID || c.Server != server ||
		g.now().Sub(issued) > clientSessionTTL || issued.After(g.now().Add(time.Minute)) {
		return "", false
	}
	return c.ID, true
}

// clientSession runs the client session of a request to the endpoint of a
// server of client scope, on protocols before 2026-07-28 (which has no
// sessions): an initialize gets a new session id; a request with a valid
// id goes on with it in its context; one with an invalid, expired or
// foreign id is answered 404, so that the client initializes again (the
// spec's answer for a session the server does not know); a DELETE with a
// valid id closes the gateway's sessions with the server that served it.
// A request without an id goes on as on a server of person scope. It
// reports whether the request goes on.
func (g *Gateway) clientSession(ctx context.Context, w http.ResponseWriter, r *http.Request, a *mcpgate.Actor,
	ep *mcpgate.ServerEndpoint, eps mcpgate.ServerEndpointService, body []byte) (context.Context, bool) {
	if !ep.ClientSessions || r.Header.Get("Mcp-Protocol-Version") == newProtocol {
		return ctx, true
	}
	if r.Method == http.MethodPost && isInitialize(body) {
		w.Header().Set("Mcp-Session-Id", g.mintClientSession(a, ep.Server))
		return ctx, true
	}
	token := r.Header.Get("Mcp-Session-Id")
	if token == "" {
		return ctx, true
	}
	id, ok := g.verifyClientSession(token, a, ep.Server)
	if !ok {
		writeSessionNotFound(w)
		return ctx, false
	}
	if r.Method == http.MethodDelete {
		if ender, ok := eps.(mcpgate.ClientSessionEnder); ok {
			if err := ender.EndClientSession(ctx, a, ep.Server, id); err != nil {
				g.log.WarnContext(ctx, "end client session", "workspace_id", a.WorkspaceID, "err", err)
			}
		}
		w.WriteHeader(http.StatusNoContent)
		return ctx, false
	}
	return mcpgate.NewContextWithClientSession(ctx, mcpgate.ClientSession{Server: ep.Server, ID: id}), true
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
