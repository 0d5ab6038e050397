package httpx

import (
	"net/http"
	"time"
)

// WriteDeadlinePerWrite serves a streaming route (MCP's POST answers, which
// may stream events for as long as a tool call or an approval wait takes)
// past the server's WriteTimeout: the handler's own deadlines bound how long
// it runs, and each write to the connection must finish within perWrite, so
// a client that stops reading holds the handler at most that long per
// chunk, never indefinitely.
func WriteDeadlinePerWrite(next http.Handler, perWrite time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: perWrite}
		// No deadline until the first write: the server's WriteTimeout
		// counts from the request, not from the answer. (A writer that
		// takes no deadlines, a test recorder, is served as it is.)
		_ = dw.rc.SetWriteDeadline(time.Time{})
		next.ServeHTTP(dw, r)
	})
}

// deadlineWriter sets the write deadline before each write and flush.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) extend() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(p)
}

// Flush flushes with a fresh deadline (go-sdk flushes each SSE event).
func (w *deadlineWriter) Flush() {
	w.extend()
	_ = w.rc.Flush()
}

// Unwrap gives http.ResponseController the connection's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
