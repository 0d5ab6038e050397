package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestServe_RequestIDOnEveryLine: a request that fails with a 500 writes an
// error line (logged deep in the handler, with the request's context) and
// an access line, and both carry, once each, the request id the response
// sent as X-Request-Id.
func TestServe_RequestIDOnEveryLine(t *testing.T) {
	env := serveEnv(t)
	env["LOG_FORMAT"] = "json"
	in := mustServe(t, env)

	// Take the users table away so that signup fails in the store.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env["DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `ALTER TABLE users RENAME TO users_gone`); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(in.base+"/api/v1/auth/signup", "application/json",
		strings.NewReader(`{"email":"ada@example.com","password":"a long enough password"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := conn.Exec(ctx, `ALTER TABLE users_gone RENAME TO users`); err != nil {
		t.Fatal(err)
	}
	id := resp.Header.Get("X-Request-Id")
	if resp.StatusCode != http.StatusInternalServerError || id == "" {
		t.Fatalf("signup = %d with X-Request-Id %q, want 500 and an id", resp.StatusCode, id)
	}

	// The access line is written after the response is sent.
	var errLine, accessLine string
	for deadline := time.Now().Add(10 * time.Second); accessLine == "" && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		errLine, accessLine = "", ""
		for _, line := range strings.Split(in.logs.String(), "\n") {
			var l struct {
				Msg       string `json:"msg"`
				Level     string `json:"level"`
				RequestID string `json:"request_id"`
				Status    int    `json:"status"`
			}
			if json.Unmarshal([]byte(line), &l) != nil || l.RequestID != id {
				continue
			}
			switch {
			case l.Msg == "request failed" && l.Level == "ERROR":
				errLine = line
			case l.Msg == "request" && l.Status == http.StatusInternalServerError:
				accessLine = line
			}
		}
	}
	if errLine == "" || accessLine == "" {
		t.Fatalf("want an error line and an access line with request_id %q; error line %q, access line %q; log:\n%s",
			id, errLine, accessLine, in.logs)
	}
	for _, line := range []string{errLine, accessLine} {
		if n := strings.Count(line, `"request_id"`); n != 1 {
			t.Errorf("request_id appears %d times in %s", n, line)
		}
	}
}
