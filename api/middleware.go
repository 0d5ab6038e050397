package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
)

// statusRecorder captures the status and size written by a handler.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

// Flush lets streaming responses (MCP's SSE) through the recorder.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func newRequestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// requestLog gives every request an id (echoed as X-Request-Id), recovers
// panics, and writes one access log line with the redacted path.
func (s *Server) requestLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := newRequestID()
		w.Header().Set("X-Request-Id", id)
		ctx := mcpgate.NewContextWithRequestID(r.Context(), id)
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.ErrorContext(ctx, "panic serving request", "panic", p, "stack", string(debug.Stack()))
				if rec.status == 0 {
					WriteError(rec, r, s.log, mcpgate.Errorf(mcpgate.EInternal, "internal error"))
				}
			}
			level := slog.LevelInfo
			if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/metrics" {
				level = slog.LevelDebug
			}
			s.log.Log(ctx, level, "request",
				"method", r.Method, "path", RedactPath(r.URL.Path), "client_address", httpx.ClientAddress(r),
				"route", chi.RouteContext(r.Context()).RoutePattern(),
				"status", rec.status, "bytes", rec.bytes, "duration_ms", float64(time.Since(start).Microseconds())/1000)
		}()
		next.ServeHTTP(rec, r.WithContext(ctx))
	})
}

// securityHeaders sets the headers every response carries; the dashboard's
// content security policy forbids inline script and framing.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// timeout bounds a JSON route's handler.
func timeout(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(context.WithValue(r.Context(), untimedKey{}, r.Context()), d)
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

type untimedKey struct{}

// untimed returns r's context (every value the middleware put in it)
// without the deadline timeout added, for a streaming route (the audit
// export) that sets bounds of its own: it still ends when the client goes
// away, which ends the context timeout started from. cancel releases it.
func untimed(r *http.Request) (ctx context.Context, cancel context.CancelFunc) {
	parent, ok := r.Context().Value(untimedKey{}).(context.Context)
	if !ok {
		return context.WithCancel(r.Context())
	}
	ctx, cancelCause := context.WithCancelCause(context.WithoutCancel(r.Context()))
	stop := context.AfterFunc(parent, func() { cancelCause(context.Cause(parent)) })
	return ctx, func() { stop(); cancelCause(context.Canceled) }
}
