package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// adminURL returns a URL of a PostgreSQL role that may create databases.
func adminURL(ctx context.Context, repo string) (string, error) {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u, nil
	}
	cmd := exec.CommandContext(ctx, "sh", "scripts/test-db.sh")
	cmd.Dir = repo
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/test-db.sh: %w", err)
	}
	u := strings.TrimSpace(string(out))
	if u == "" {
		return "", fmt.Errorf("scripts/test-db.sh printed no URL")
	}
	return u, nil
}

// freshDatabase creates an empty database and returns its URL and a func
// that drops it.
func freshDatabase(ctx context.Context, admin string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("connect to the test database server: %w", err)
	}
	defer conn.Close(ctx)
	name := "mcpgate_bench_" + randomHex(6)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create database: %w", err)
	}
	u, err := url.Parse(admin)
	if err != nil || u.Scheme == "" {
		return "", nil, fmt.Errorf("TEST_DATABASE_URL must be a postgres:// URL")
	}
	u.Path = "/" + name
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	return u.String(), drop, nil
}

// apiClient is a dashboard session on the JSON API.
type apiClient struct {
	base string
	http *http.Client
	csrf string
}

func newAPIClient(base string) *apiClient {
	jar, _ := cookiejar.New(nil)
	return &apiClient{base: base, http: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

func (c *apiClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.csrf != "" {
		req.Header.Set("X-CSRF-Token", c.csrf)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	for _, ck := range resp.Cookies() {
		if ck.Name == "mcpgate_csrf" {
			c.csrf = ck.Value
		}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// fixture is what the load phases use.
type fixture struct {
	workspaceID string
	mcpKeys     []string
	e2bKey      string
	sandboxes   []string
}

// setUp creates a user, its workspace's E2B connection, n MCP keys, and
// sandboxes in the simulator.
func setUp(ctx context.Context, gatewayURL, simURL, e2bKey string, keys, sandboxes int) (*fixture, error) {
	c := newAPIClient(gatewayURL)
	email := "bench-" + randomHex(4) + "@example.com"
	if err := c.do(ctx, "POST", "/api/v1/auth/signup", map[string]string{"email": email, "password": "bench-" + randomHex(16)}, nil); err != nil {
		return nil, err
	}
	var ws struct {
		Workspaces []struct {
			ID string `json:"id"`
		} `json:"workspaces"`
	}
	if err := c.do(ctx, "GET", "/api/v1/workspaces", nil, &ws); err != nil {
		return nil, err
	}
	if len(ws.Workspaces) == 0 {
		return nil, fmt.Errorf("the new user has no workspace")
	}
	f := &fixture{workspaceID: ws.Workspaces[0].ID, e2bKey: e2bKey}
	if err := c.do(ctx, "PUT", "/api/v1/workspaces/"+f.workspaceID+"/connections/e2b", map[string]string{"api_key": e2bKey}, nil); err != nil {
		return nil, err
	}
	for i := range keys {
		var k struct {
			Key string `json:"key"`
		}
		if err := c.do(ctx, "POST", "/api/v1/workspaces/"+f.workspaceID+"/keys",
			map[string]string{"name": fmt.Sprintf("bench-%d", i), "scope": "full"}, &k); err != nil {
			return nil, err
		}
		f.mcpKeys = append(f.mcpKeys, k.Key)
	}
	sim := &http.Client{Timeout: 10 * time.Second}
	for range sandboxes {
		body := strings.NewReader(`{"templateID":"base","timeout":3600,"metadata":{"app":"bench"}}`)
		req, _ := http.NewRequestWithContext(ctx, "POST", simURL+"/sandboxes", body)
		req.Header.Set("X-API-Key", e2bKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := sim.Do(req)
		if err != nil {
			return nil, err
		}
		var sb struct {
			SandboxID string `json:"sandboxID"`
		}
		err = json.NewDecoder(resp.Body).Decode(&sb)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK || sb.SandboxID == "" {
			return nil, fmt.Errorf("create sandbox in the simulator: %s %v", resp.Status, err)
		}
		f.sandboxes = append(f.sandboxes, sb.SandboxID)
	}
	return f, nil
}
