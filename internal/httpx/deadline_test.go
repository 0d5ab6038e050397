package httpx_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/httpx"
)

// TestWriteDeadlinePerWrite: a streaming route answers
// after the server's WriteTimeout has passed, which without the wrapper
// cuts its answer off; each write still gets a deadline of its own.
func TestWriteDeadlinePerWrite(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond) // a tool call that takes longer than WriteTimeout
		_, _ = io.WriteString(w, "event one\n")
		http.NewResponseController(w).Flush()
		_, _ = io.WriteString(w, "event two\n")
	})
	for _, tt := range []struct {
		name    string
		handler http.Handler
		want    string
	}{
		{name: "wrapped", handler: httpx.WriteDeadlinePerWrite(slow, time.Second), want: "event one\nevent two\n"},
		{name: "not wrapped", handler: slow, want: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(tt.handler)
			srv.Config.WriteTimeout = 100 * time.Millisecond
			srv.Start()
			defer srv.Close()
			resp, err := http.Get(srv.URL)
			got := ""
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got = string(b)
			}
			if got != tt.want {
				t.Errorf("body = %q (err %v), want %q", got, err, tt.want)
			}
		})
	}
}
