package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

// Auth failure reasons of the endpoint itself, for metrics and logs only.
const reasonMissing = "missing"

var (
	errUnauthorized = mcpgate.Errorf(mcpgate.EUnauthorized,
		"a valid MCP key or OAuth access token is required: sign in through your client's OAuth flow, "+
			"send Authorization: Bearer <key>, or use your connector URL")
	errAuthUnavailable = mcpgate.Errorf(mcpgate.EUnavailable,
		"the gateway cannot check keys right now; try again in a few seconds")
)

// presented reads the credential a request presents: the connector URL's
// path segment, else an Authorization bearer token, else X-API-Key; an empty
// Value for none. An Authorization header of another scheme presents
// nothing, and X-API-Key is not read beside it.
func presented(r *http.Request) mcpgate.Presented {
	if k := r.PathValue("key"); k != "" {
		return mcpgate.Presented{Value: mcpgate.Secret(k)}
	}
	if k := mcpgate.ConnectorURLKey(r.URL.Path); k != "" {
		return mcpgate.Presented{Value: mcpgate.Secret(k)}
	}
	if h := r.Header.Get("Authorization"); h != "" {
		if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return mcpgate.Presented{Value: mcpgate.Secret(strings.TrimSpace(tok)), Bearer: true}
		}
		return mcpgate.Presented{}
	}
	return mcpgate.Presented{Value: mcpgate.Secret(strings.TrimSpace(r.Header.Get("X-API-Key")))}
}

// authenticate reads the request's credential and asks each authenticator
// in turn. It returns the actor, or the reason it was refused (for
// metrics), or an error when a credential could not be checked at all.
func (g *Gateway) authenticate(r *http.Request) (*mcpgate.Actor, string, error) {
	p := presented(r)
	if p.Value == "" {
		return nil, reasonMissing, nil
	}
	for _, a := range g.opts.Authenticators {
		actor, err := a.Authenticate(r.Context(), p)
		if ae := (*mcpgate.AuthError)(nil); errors.As(err, &ae) {
			return nil, ae.Reason, nil
		}
		if err != nil {
			return nil, "", err
		}
		if actor != nil && actor.GrantID != "" && g.opts.TokenFor != nil && !g.opts.TokenFor(actor.Resource, endpointPath(r)) {
			return nil, reasonAudience, nil // a token for another of the gateway's endpoints
		}
		if actor != nil {
			return actor, "", nil
		}
	}
	return nil, reasonMissing, nil
}

// reasonAudience is internal/auth's reason for a token of another
// resource: a token for another endpoint of this gateway is refused alike.
const reasonAudience = "oauth_audience"

// endpointPath is the path of the MCP endpoint a request is for, as a
// resource: /mcp/<server> on a server's own endpoint, /mcp otherwise.
func endpointPath(r *http.Request) string {
	if server := r.PathValue("server"); server != "" {
		return "/mcp/" + server
	}
	return "/mcp"
}

// oauthChallenge is the OAuth challenge of the endpoint a request is
// for: a server's endpoint names its own resource metadata.
func (g *Gateway) oauthChallenge(r *http.Request) string {
	if server := r.PathValue("server"); server != "" && g.opts.ServerChallenge != nil {
		return g.opts.ServerChallenge(server)
	}
	return g.opts.Challenge
}

func retryAfter(err *mcpgate.Error, wait time.Duration) *mcpgate.Error {
	e := *err
	e.RetryAfter = max(1, int((wait+time.Second-1)/time.Second))
	return &e
}

// sdkHandler is go-sdk's stateless handler, which both endpoints (/mcp and
// each server's) serve what their own code does not answer with; the
// request's server is the one put in its context.
func (g *Gateway) sdkHandler() *sdk.StreamableHTTPHandler {
	return sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		return serverFrom(r.Context())
	}, &sdk.StreamableHTTPOptions{
		Stateless:                    true,
		PropagateRequestCancellation: true,
		// The gateway runs behind proxies that keep the public Host; the key
		// is the authentication, not the Host header.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        maxBody,
		Logger:                     g.sdkLog,
	})
}

// Handler returns the MCP endpoint for /mcp and the connector URL.
func (g *Gateway) Handler() http.Handler { return g.handler(true) }

// handler is the endpoint, with or without the fast path (fastpath.go); the
// differential test serves the same gateway both ways.
func (g *Gateway) handler(fast bool) http.Handler {
	streamable := g.sdkHandler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		actor, ok := g.admit(w, r)
		if !ok {
			return
		}
		body, ok := g.checkBody(w, r)
		if !ok || g.serveStream(w, r, actor, body, g.gatewayList) {
			return
		}
		defer g.push.track()()
		if g.stepUp(w, r, actor, body) {
			return
		}
		if legacyAnswer(r, body) {
			lw := &legacyWriter{w: w}
			defer lw.finish()
			w = lw
		}
		// The per-key limit counts tool calls (limitCall), not every request.
		r = r.WithContext(mcpgate.NewContextWithActor(r.Context(), actor))
		if fast && g.serveFast(w, r, actor) {
			return
		}
		srv, err := g.server(r.Context(), actor)
		if err != nil {
			// Never go-sdk's 400 "no server available": the client is told
			// to wait, in a message it can show.
			g.log.WarnContext(r.Context(), "build MCP server", "workspace_id", actor.WorkspaceID, "err", err)
			writeRPCUnavailable(w, r, unavailableMessage(err))
			return
		}
		streamable.ServeHTTP(w, r.WithContext(withServer(withRequestContext(r.Context()), srv)))
	})
}

// admit runs what every MCP endpoint does before it reads a request: the
// origin check, the credential and the limit on failed ones. It answers
// the request itself and reports false when it may not go on.
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request) (*mcpgate.Actor, bool) {
	if !g.checkOrigin(w, r) {
		return nil, false
	}
	addr := httpx.ClientAddress(r)
	now := g.now()
	actor, reason, err := g.authenticate(r)
	if err != nil {
		g.log.ErrorContext(r.Context(), "authenticate MCP credential", "err", err)
		writeRPCUnavailable(w, r, errAuthUnavailable.Message)
		return nil, false
	}
	if actor == nil {
		// The limit applies to failures only: behind a proxy every
		// client shares one address, and someone else's bad keys must
		// not lock out valid ones.
		if limited, wait := g.authFails.Exhausted(addr, now); limited {
			g.metrics.RateLimited()
			httpx.WriteError(w, r, g.log, retryAfter(mcpgate.Errorf(mcpgate.ETooMany,
				"too many requests with invalid keys; wait and try again"), wait))
			return nil, false
		}
		g.authFails.Allow(addr, now)
		g.metrics.AuthFailure(reason)
		g.log.InfoContext(r.Context(), "MCP credential refused", "reason", reason)
		w.Header().Set("WWW-Authenticate", g.challenge(r, reason))
		if other := g.loopbackAlias(r); other != "" {
			httpx.WriteError(w, r, g.log, mcpgate.Errorf(mcpgate.EUnauthorized,
				"this gateway's address is %s: connect to %s%s (a sign-in at %s cannot match it)",
				g.opts.PublicURL, strings.TrimRight(g.opts.PublicURL, "/"), endpointPath(r), other))
			return nil, false
		}
		httpx.WriteError(w, r, g.log, errUnauthorized)
		return nil, false
	}
	return actor, true
}

// challenge is the WWW-Authenticate of a 401. With OAuth configured it
// points to the protected-resource metadata (RFC 9728 §5.1), so that an
// OAuth-capable client can start signing in; error="invalid_token" is added
// only when a credential was presented (RFC 6750 §3.1). Every refused
// credential, key or token, gets the same answer. Two requests get no OAuth
// hint, since a sign-in could not succeed there: a connector URL (its key
// is in the path; it is not an OAuth resource), and the PUBLIC_URL's
// loopback host under another name (localhost for 127.0.0.1), whose
// metadata would name a resource the client does not think it reached. A
// server's own endpoint names its own metadata (oauthChallenge).
func (g *Gateway) challenge(r *http.Request, reason string) string {
	plain := `Bearer realm="mcpgate", error="invalid_token"`
	switch {
	case g.opts.Challenge == "" || r.PathValue("key") != "" || mcpgate.ConnectorURLKey(r.URL.Path) != "":
		return plain
	case g.loopbackAlias(r) != "":
		return plain + `, error_description="connect to ` + strings.TrimRight(g.opts.PublicURL, "/") + endpointPath(r) + `"`
	case reason == reasonMissing:
		return g.oauthChallenge(r)
	}
	return g.oauthChallenge(r) + `, error="invalid_token"`
}

// loopbackAlias returns the request's host when it is a loopback name other
// than the PUBLIC_URL's loopback host (localhost against 127.0.0.1, or
// [::1]), the mistake a local setup makes; "" otherwise.
func (g *Gateway) loopbackAlias(r *http.Request) string {
	pu, err := url.Parse(g.opts.PublicURL)
	if err != nil || pu.Host == "" || !isLoopbackName(pu.Hostname()) {
		return ""
	}
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		host, port = strings.Trim(r.Host, "[]"), ""
	}
	wantPort := pu.Port()
	if wantPort == "" && pu.Scheme == "https" {
		wantPort = "443"
	} else if wantPort == "" {
		wantPort = "80"
	}
	if port == "" {
		port = wantPort
	}
	if !isLoopbackName(host) || strings.EqualFold(host, pu.Hostname()) || port != wantPort {
		return ""
	}
	return r.Host
}

func isLoopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// stepUp answers a read-only OAuth grant's call of a tool that changes
// things with 403 and error="insufficient_scope" naming the scope it needs
// (MCP authorization 2025-11-25, "Scope challenge handling"; RFC 6750
// §3.1), so that the client can ask the person for more access; it
// reports whether it answered. A key has no OAuth flow to step up through,
// and a tool the workspace has turned off or does not have is for the
// service to refuse: neither is answered here.
func (g *Gateway) stepUp(w http.ResponseWriter, r *http.Request, a *mcpgate.Actor, body []byte) bool {
	if !g.mayStepUp(a) {
		return false
	}
	name, ok := calledTool(body)
	return ok && g.stepUpTool(w, r, a, name)
}

// mayStepUp reports whether a call of a may need a scope challenge: only a
// read-only OAuth grant's, on a gateway that has a challenge to send.
func (g *Gateway) mayStepUp(a *mcpgate.Actor) bool {
	return a.GrantID != "" && a.Scope == mcpgate.ScopeReadOnly && g.opts.Challenge != "" && g.opts.Tools != nil
}

// calledTool returns the tool a tools/call message names.
func calledTool(body []byte) (string, bool) {
	var call struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &call) != nil || call.Method != "tools/call" {
		return "", false
	}
	return call.Params.Name, true
}

// stepUpTool is stepUp for a call of the tool the tool service knows as
// name; it reports whether it answered.
func (g *Gateway) stepUpTool(w http.ResponseWriter, r *http.Request, a *mcpgate.Actor, name string) bool {
	set, err := g.opts.Tools.ToolSet(r.Context(), a)
	if err != nil {
		return false
	}
	info, ok := set.All[name]
	if !ok || !info.Enabled || info.ReadOnly {
		return false
	}
	// The 401 challenge names the resource metadata and the scope of full
	// access, which is the one needed here.
	w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", `+strings.TrimPrefix(g.oauthChallenge(r), "Bearer ")+
		`, error_description="`+name+` needs `+mcpgate.OAuthScopeTools+`"`)
	g.log.InfoContext(r.Context(), "MCP call needs more scope", "tool", name, "grant_id", a.GrantID)
	httpx.WriteError(w, r, g.log, mcpgate.Errorf(mcpgate.EForbidden,
		"This app's access to the workspace is read-only (the grant was given as read-only), and %s changes things "+
			"rather than reading them. The app can ask you again for full access (scope %s): sign in again from the app "+
			"and choose Full.", name, mcpgate.OAuthScopeTools))
	return true
}

// actorFrom returns the request's actor inside a tool handler.
func actorFrom(ctx context.Context) *mcpgate.Actor { return mcpgate.ActorFromContext(ctx) }
