package mcp

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate"
)

// Identity is who is calling: the key, its owner, its workspace and scope.
type Identity struct {
	KeyID       string
	UserID      string
	WorkspaceID string
	Scope       mcpgate.Scope
}

type identityKey struct{}

func identityFrom(ctx context.Context) *Identity {
	id, _ := ctx.Value(identityKey{}).(*Identity)
	return id
}

type cachedKey struct {
	key     mcpgate.APIKey
	hash    []byte
	fetched time.Time
}

// Auth failure reasons, used only for metrics and logs, never in responses.
const (
	reasonMissing   = "missing"
	reasonMalformed = "malformed"
	reasonUnknown   = "unknown"
	reasonRevoked   = "revoked"
	reasonExpired   = "expired"
)

// keyFromRequest returns the presented key: the connector URL's path segment,
// an Authorization bearer token, or X-API-Key.
func keyFromRequest(r *http.Request) string {
	if k := r.PathValue("key"); k != "" {
		return k
	}
	if p := strings.TrimPrefix(r.URL.Path, "/c/"); p != r.URL.Path {
		if k, _, ok := strings.Cut(p, "/"); ok {
			return k
		}
	}
	if h := r.Header.Get("Authorization"); h != "" {
		if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
		return ""
	}
	return strings.TrimSpace(r.Header.Get("X-API-Key"))
}

// authenticate checks a key; its failures carry a reason for metrics only.
func (g *Gateway) authenticate(ctx context.Context, presented string) (*Identity, string, error) {
	if presented == "" {
		return nil, reasonMissing, nil
	}
	id, secret, ok := mcpgate.ParseMCPKey(presented)
	if !ok {
		return nil, reasonMalformed, nil
	}
	now := g.now()
	var ck *cachedKey
	if v, ok := g.keys.Load(id); ok && now.Sub(v.(*cachedKey).fetched) < g.opts.CacheTTL {
		ck = v.(*cachedKey)
	} else {
		gen := g.gen.Load()
		k, hash, err := g.opts.Backend.FindKeyForAuth(ctx, id)
		if err != nil {
			if mcpgate.ErrorCode(err) == mcpgate.ENotFound {
				return nil, reasonUnknown, nil
			}
			return nil, "", err
		}
		ck = &cachedKey{key: *k, hash: hash, fetched: now}
		g.storeIfCurrent(&g.keys, id, ck, gen)
	}
	if subtle.ConstantTimeCompare(mcpgate.HashMCPKeySecret(secret), ck.hash) != 1 {
		return nil, reasonUnknown, nil
	}
	if ck.key.RevokedAt != nil {
		return nil, reasonRevoked, nil
	}
	if ck.key.ExpiresAt != nil && !now.Before(*ck.key.ExpiresAt) {
		return nil, reasonExpired, nil
	}
	return &Identity{KeyID: ck.key.ID, UserID: ck.key.UserID, WorkspaceID: ck.key.WorkspaceID, Scope: ck.key.Scope}, "", nil
}

// Handler returns the MCP endpoint for /mcp and /c/{key}/mcp.
func (g *Gateway) Handler() http.Handler {
	streamable := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		id := identityFrom(r.Context())
		if id == nil {
			return nil
		}
		srv, err := g.server(r.Context(), id.WorkspaceID, id.Scope)
		if err != nil {
			g.log.ErrorContext(r.Context(), "build MCP server", "workspace_id", id.WorkspaceID, "err", err)
			return nil
		}
		return srv
	}, &sdk.StreamableHTTPOptions{
		Stateless:                    true,
		PropagateRequestCancellation: true,
		// The gateway runs behind proxies that keep the public Host; the key
		// is the authentication, not the Host header.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        1 << 20,
		Logger:                     g.log,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := clientAddress(r)
		now := g.now()
		id, reason, err := g.authenticate(r.Context(), keyFromRequest(r))
		if err != nil {
			g.log.ErrorContext(r.Context(), "authenticate MCP key", "err", err)
			writeHTTPError(w, http.StatusServiceUnavailable, 0, "unavailable", "the gateway cannot check keys right now; try again shortly")
			return
		}
		if id == nil {
			// The limit applies to failures only: behind a proxy every
			// client shares one address, and someone else's bad keys must
			// not lock out valid ones.
			if limited, wait := g.authFails.exhausted(addr, now); limited {
				g.metrics.RateLimited()
				writeHTTPError(w, http.StatusTooManyRequests, wait, "rate_limited", "too many requests with invalid keys; wait and try again")
				return
			}
			g.authFails.allow(addr, now)
			g.metrics.AuthFailure(reason)
			g.log.InfoContext(r.Context(), "MCP key refused", "reason", reason)
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcpgate", error="invalid_token"`)
			writeHTTPError(w, http.StatusUnauthorized, 0, "unauthorized",
				"a valid MCP key is required: send Authorization: Bearer <key>, or use your connector URL")
			return
		}
		if ok, wait := g.limiters.allow(id.KeyID, now); !ok {
			g.metrics.RateLimited()
			writeHTTPError(w, http.StatusTooManyRequests, wait, "rate_limited", "this key is sending too many requests; slow down")
			return
		}
		g.touch(id.KeyID)
		streamable.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	})
}

func writeHTTPError(w http.ResponseWriter, status int, retryAfter time.Duration, code, msg string) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
