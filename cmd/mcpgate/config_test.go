package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/time/rate"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/mcp"
)

// envOf returns a getenv over m.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// newKey returns a fresh root key, base64.
func newKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// mustFile writes content to a new file and returns its path.
func mustFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatalf("WriteFile() err = %v", err)
	}
	return p
}

func mustLoadConfig(t *testing.T, args []string, env map[string]string) *Config {
	t.Helper()
	c, err := LoadConfig(args, envOf(env))
	if err != nil {
		t.Fatalf("LoadConfig(%q) err = %v, want nil", args, err)
	}
	return c
}

// wantConfig is the configuration with every default.
func wantConfig() *Config {
	var c Config
	c.HTTP.ListenAddr = ":8080"
	c.HTTP.PublicURL = "http://localhost:8080"
	c.DB.DataDir = "./data"
	c.Session.Signup = "open"
	c.E2B.APIURL = "https://api.e2b.app"
	c.E2B.DashboardAPIURL = "https://dashboard-api.e2b.app"
	c.MCP.Key, c.MCP.User, c.MCP.Workspace = Limit{20, 40}, Limit{40, 200}, Limit{100, 400}
	c.Caps.KeysPerUser, c.Caps.WorkspacesPerUser = 100, 20
	c.MCP.OutageGrace = 10 * time.Minute
	c.Proxy.Trusted = &httpx.Proxies{}
	c.LogFormat = "json"
	c.LogLevel = slog.LevelInfo
	c.Mail.Verify = "off" // no SMTP_URL
	return &c
}

// cmpConfig compares the trusted proxies by what they list.
var cmpConfig = cmp.Comparer(func(a, b *httpx.Proxies) bool { return a.String() == b.String() })

func TestLoadConfig_Defaults(t *testing.T) {
	got := mustLoadConfig(t, nil, nil)
	if diff := cmp.Diff(wantConfig(), got, cmpConfig); diff != "" {
		t.Errorf("LoadConfig() defaults (-want +got):\n%s", diff)
	}
	if !got.Embedded() {
		t.Errorf("Embedded() = false without DATABASE_URL")
	}
}

func TestLoadConfig_Sources(t *testing.T) {
	key, jwtSecret := newKey(t), newKey(t)
	allEnv := map[string]string{
		"LISTEN_ADDR": "127.0.0.1:9000", "PUBLIC_URL": "https://gw.example.com/", "DATABASE_URL": "postgres://db.example.com/mcpgate",
		"DATA_DIR": "/var/lib/mcpgate", "ENCRYPTION_KEY": key, "JWT_SECRET": jwtSecret, "SIGNUP": "invite",
		"E2B_API_URL": "http://127.0.0.1:3000", "E2B_DASHBOARD_API_URL": "http://127.0.0.1:3001", "LOG_FORMAT": "text", "LOG_LEVEL": "debug",
		"OUTAGE_GRACE": "2m",
	}
	fromEnv := func() *Config {
		c := wantConfig()
		c.HTTP.ListenAddr, c.HTTP.PublicURL = "127.0.0.1:9000", "https://gw.example.com"
		c.DB.URL, c.DB.DataDir = "postgres://db.example.com/mcpgate", "/var/lib/mcpgate"
		c.Vault.EncryptionKey, c.Session.JWTSecret = mcpgate.Secret(key), mcpgate.Secret(jwtSecret)
		c.Session.Signup = "invite"
		c.E2B.APIURL, c.E2B.DashboardAPIURL = "http://127.0.0.1:3000", "http://127.0.0.1:3001"
		c.LogFormat, c.LogLevel = "text", slog.LevelDebug
		c.MCP.OutageGrace = 2 * time.Minute
		return c
	}
	otherKey := newKey(t)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want func() *Config
	}{
		{name: "environment", env: allEnv, want: fromEnv},
		{name: "flags beat the environment",
			args: []string{"-listen", "127.0.0.1:9999", "--signup=open", "-jwt-secret", otherKey, "-log-format", "json"},
			env:  allEnv,
			want: func() *Config {
				c := fromEnv()
				c.HTTP.ListenAddr, c.Session.Signup, c.Session.JWTSecret, c.LogFormat = "127.0.0.1:9999", "open", mcpgate.Secret(otherKey), "json"
				return c
			}},
		{name: "a flag beats NAME_FILE too",
			args: []string{"-jwt-secret", otherKey},
			env:  mergeEnv(allEnv, map[string]string{"JWT_SECRET": "", "JWT_SECRET_FILE": mustFile(t, jwtSecret)}),
			want: func() *Config { c := fromEnv(); c.Session.JWTSecret = mcpgate.Secret(otherKey); return c }},
		{name: "NAME_FILE variants, trimmed",
			env: mergeEnv(allEnv, map[string]string{
				"ENCRYPTION_KEY": "", "ENCRYPTION_KEY_FILE": mustFile(t, key+"\n"),
				"JWT_SECRET": "", "JWT_SECRET_FILE": mustFile(t, "  "+jwtSecret+"\r\n"),
				"DATABASE_URL": "", "DATABASE_URL_FILE": mustFile(t, "postgres://db.example.com/mcpgate\n"),
			}),
			want: fromEnv},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustLoadConfig(t, tt.args, tt.env)
			if diff := cmp.Diff(tt.want(), got, cmpConfig); diff != "" {
				t.Errorf("LoadConfig() (-want +got):\n%s", diff)
			}
		})
	}
}

func mergeEnv(a, b map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

func TestLoadConfig_Problems(t *testing.T) {
	key := newKey(t)
	external := map[string]string{"DATABASE_URL": "postgres://db.example.com/mcpgate", "ENCRYPTION_KEY": key, "JWT_SECRET": newKey(t)}
	short := newKey(t)[:22] + "=="
	tests := []struct {
		name         string
		env          map[string]string
		wantProblems []string // one substring per problem, in order
	}{
		{name: "both NAME and NAME_FILE",
			env:          mergeEnv(external, map[string]string{"JWT_SECRET_FILE": mustFile(t, newKey(t))}),
			wantProblems: []string{"JWT_SECRET and JWT_SECRET_FILE are both set"}},
		{name: "unreadable NAME_FILE",
			env:          mergeEnv(external, map[string]string{"ENCRYPTION_KEY": "", "ENCRYPTION_KEY_FILE": "/nonexistent/key"}),
			wantProblems: []string{"ENCRYPTION_KEY_FILE: cannot read /nonexistent/key", "ENCRYPTION_KEY is required"}},
		{name: "four bad values at once",
			env:          mergeEnv(external, map[string]string{"LISTEN_ADDR": "8080", "PUBLIC_URL": "ftp://example.com", "SIGNUP": "closed", "LOG_FORMAT": "xml"}),
			wantProblems: []string{"LISTEN_ADDR", "PUBLIC_URL", "SIGNUP", "LOG_FORMAT"}},
		{name: "every problem at once",
			env: map[string]string{"LISTEN_ADDR": "nope", "PUBLIC_URL": "localhost", "E2B_API_URL": "api.e2b.app",
				"E2B_DASHBOARD_API_URL": "//x", "SIGNUP": "", "LOG_FORMAT": "yaml", "LOG_LEVEL": "loud",
				"DATABASE_URL": "postgres://db/x", "JWT_SECRET": "short"},
			wantProblems: []string{"LISTEN_ADDR", "PUBLIC_URL", "E2B_API_URL", "E2B_DASHBOARD_API_URL", "LOG_FORMAT", "LOG_LEVEL",
				"ENCRYPTION_KEY is required", "JWT_SECRET must be at least 32 bytes"}},
		{name: "outage grace not a duration", env: mergeEnv(external, map[string]string{"OUTAGE_GRACE": "ten minutes"}),
			wantProblems: []string{"OUTAGE_GRACE must be a duration"}},
		{name: "negative outage grace", env: mergeEnv(external, map[string]string{"OUTAGE_GRACE": "-1m"}),
			wantProblems: []string{"OUTAGE_GRACE must be a duration"}},
		{name: "external database without secrets",
			env:          map[string]string{"DATABASE_URL": "postgres://db.example.com/mcpgate"},
			wantProblems: []string{"ENCRYPTION_KEY is required", "JWT_SECRET is required"}},
		{name: "placeholder JWT secret",
			env:          mergeEnv(external, map[string]string{"JWT_SECRET": "changeme-changeme-changeme-changeme"}),
			wantProblems: []string{"JWT_SECRET looks like a placeholder"}},
		{name: "placeholder JWT secret in a file",
			env:          mergeEnv(external, map[string]string{"JWT_SECRET": "", "JWT_SECRET_FILE": mustFile(t, "your-jwt-secret-goes-here-please-replace\n")}),
			wantProblems: []string{"JWT_SECRET looks like a placeholder"}},
		{name: "a short placeholder word",
			env:          mergeEnv(external, map[string]string{"JWT_SECRET": "TODO: put 32 random bytes here, then restart"}),
			wantProblems: []string{"JWT_SECRET looks like a placeholder"}},
		{name: "one repeated character",
			env:          mergeEnv(external, map[string]string{"JWT_SECRET": strings.Repeat("0", 40)}),
			wantProblems: []string{"JWT_SECRET looks like a placeholder"}},
		{name: "short JWT secret",
			env:          mergeEnv(external, map[string]string{"JWT_SECRET": "k3Yq9vP2mX7rT4wZ"}),
			wantProblems: []string{"JWT_SECRET must be at least 32 bytes"}},
		{name: "placeholder encryption key",
			env:          mergeEnv(external, map[string]string{"ENCRYPTION_KEY": "changeme"}),
			wantProblems: []string{"ENCRYPTION_KEY looks like a placeholder"}},
		{name: "encryption key of 16 bytes",
			env:          mergeEnv(external, map[string]string{"ENCRYPTION_KEY": short}),
			wantProblems: []string{"ENCRYPTION_KEY must be 32 random bytes"}},
		{name: "encryption key not base64",
			env:          mergeEnv(external, map[string]string{"ENCRYPTION_KEY": "!!" + key[2:]}),
			wantProblems: []string{"ENCRYPTION_KEY must be 32 random bytes"}},
		{name: "bad TRUSTED_PROXIES",
			env:          mergeEnv(external, map[string]string{"TRUSTED_PROXIES": "10.0.0.0/8, proxy.internal"}),
			wantProblems: []string{`TRUSTED_PROXIES: not a CIDR or IP address: "proxy.internal"`}},
		{name: "bad UPSTREAM_PRIVATE_NETWORKS",
			env:          mergeEnv(external, map[string]string{"UPSTREAM_PRIVATE_NETWORKS": "10.20.0.0/16,hooks.internal"}),
			wantProblems: []string{`UPSTREAM_PRIVATE_NETWORKS: not a CIDR or IP address: "hooks.internal"`}},
		{name: "good TRUSTED_PROXIES",
			env: mergeEnv(external, map[string]string{"TRUSTED_PROXIES": "10.0.0.0/8,172.16.0.0/12 fd00::/8"})},
		{name: "bad caps",
			env:          mergeEnv(external, map[string]string{"MAX_KEYS_PER_USER": "0", "MAX_WORKSPACES_PER_USER": "many"}),
			wantProblems: []string{"MAX_KEYS_PER_USER must be", "MAX_WORKSPACES_PER_USER must be"}},
		{name: "bad ALLOWED_ORIGINS",
			env:          mergeEnv(external, map[string]string{"ALLOWED_ORIGINS": "https://ok.example.com, https://x.example.com/path"}),
			wantProblems: []string{`ALLOWED_ORIGINS: "https://x.example.com/path" is not an origin`}},
		{name: "embedded, bad secrets still checked",
			env:          map[string]string{"JWT_SECRET": "short", "ENCRYPTION_KEY": "changeme"},
			wantProblems: []string{"ENCRYPTION_KEY looks like a placeholder", "JWT_SECRET must be at least 32 bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig(nil, envOf(tt.env))
			if len(tt.wantProblems) == 0 {
				if err != nil {
					t.Fatalf("LoadConfig() err = %v, want nil", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("LoadConfig() err = %v, want a *ConfigError", err)
			}
			if len(ce.Problems) != len(tt.wantProblems) {
				t.Fatalf("LoadConfig() problems = %q, want %d: %q", ce.Problems, len(tt.wantProblems), tt.wantProblems)
			}
			for i, want := range tt.wantProblems {
				if !strings.Contains(ce.Problems[i], want) {
					t.Errorf("problem %d = %q, want it to mention %q", i, ce.Problems[i], want)
				}
			}
			// One line per problem.
			if got := strings.Count(ce.Error(), "\n  - "); got != len(tt.wantProblems) {
				t.Errorf("Error() has %d problem lines, want %d:\n%s", got, len(tt.wantProblems), ce.Error())
			}
			// A problem never echoes a secret.
			for _, name := range []string{"JWT_SECRET", "ENCRYPTION_KEY"} {
				if v := tt.env[name]; len(v) >= 8 && strings.Contains(ce.Error(), v) {
					t.Errorf("Error() shows %s:\n%s", name, ce.Error())
				}
			}
		})
	}
}

func TestLoadConfig_BadArguments(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "unknown flag", args: []string{"-no-such-flag"}},
		{name: "positional argument", args: []string{"extra"}},
		{name: "flag without value", args: []string{"-listen"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := LoadConfig(tt.args, envOf(nil)); err == nil {
				t.Fatalf("LoadConfig(%q) err = nil, want an error", tt.args)
			}
		})
	}
}

// migrate never seals or signs, so it runs against an external database
// without the secrets.
func TestLoadConfig_MigrateNeedsNoSecrets(t *testing.T) {
	if _, err := loadConfig("migrate", nil, envOf(map[string]string{"DATABASE_URL": "postgres://db/x"}), false); err != nil {
		t.Fatalf("loadConfig(migrate) err = %v, want nil", err)
	}
}

// keyContaining returns a deterministic 32-byte key whose encoding by enc
// contains word in any letter case.
func keyContaining(t *testing.T, enc *base64.Encoding, word string) string {
	t.Helper()
	for i := uint64(0); i < 50_000_000; i++ {
		var seed [8]byte
		binary.BigEndian.PutUint64(seed[:], i)
		sum := sha256.Sum256(seed[:])
		if s := enc.EncodeToString(sum[:]); strings.Contains(strings.ToLower(s), word) {
			return s
		}
	}
	t.Fatalf("no key found containing %q", word)
	return ""
}

// A random key is never a placeholder, even when its letters happen to spell
// a short placeholder word (about one `openssl rand -base64 32` key in 800
// contains "xxx" in some letter case).
func TestLoadConfig_RandomSecretsAccepted(t *testing.T) {
	var keys []string
	for _, word := range []string{"xxx", "todo"} {
		keys = append(keys, keyContaining(t, base64.StdEncoding, word))
	}
	for range 2000 {
		keys = append(keys, newKey(t))
	}
	// A key whose first letters spell the word and then break at a base64
	// character, as one did in a CI run ("xxX+…"), or end with it.
	k := newKey(t)
	keys = append(keys, "xxX+"+k[4:], k[:36]+"/ToDo+A=")
	for _, k := range keys {
		env := map[string]string{"DATABASE_URL": "postgres://db/x", "ENCRYPTION_KEY": k, "JWT_SECRET": k}
		if _, err := LoadConfig(nil, envOf(env)); err != nil {
			t.Fatalf("LoadConfig() with random key %q err = %v, want nil", k, err)
		}
	}
	// Hex secrets (openssl rand -hex 32) are fine for JWT_SECRET.
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	env := map[string]string{"DATABASE_URL": "postgres://db/x", "ENCRYPTION_KEY": newKey(t), "JWT_SECRET": hex.EncodeToString(b)}
	if _, err := LoadConfig(nil, envOf(env)); err != nil {
		t.Fatalf("LoadConfig() with a hex JWT secret err = %v, want nil", err)
	}
}

func TestEnsureGeneratedSecrets(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	env := map[string]string{"DATA_DIR": dir}

	first := mustLoadConfig(t, nil, env)
	generated, err := first.ensureGeneratedSecrets()
	if err != nil {
		t.Fatalf("ensureGeneratedSecrets() err = %v", err)
	}
	wantPaths := []string{filepath.Join(dir, "encryption_key"), filepath.Join(dir, "jwt_secret")}
	if diff := cmp.Diff(wantPaths, generated); diff != "" {
		t.Fatalf("generated (-want +got):\n%s", diff)
	}
	for _, p := range wantPaths {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("Stat(%s) err = %v", p, err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %v, want 0600", p, st.Mode().Perm())
		}
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("data dir mode = %v, %v; want 0700", st.Mode().Perm(), err)
	}
	// The generated values pass the same checks as given ones.
	checked := mustLoadConfig(t, nil, map[string]string{"DATA_DIR": dir,
		"ENCRYPTION_KEY": first.Vault.EncryptionKey.Reveal(), "JWT_SECRET": first.Session.JWTSecret.Reveal()})
	if checked.Vault.EncryptionKey != first.Vault.EncryptionKey {
		t.Fatalf("generated encryption key did not round-trip")
	}

	// A second start reuses them.
	second := mustLoadConfig(t, nil, env)
	generated, err = second.ensureGeneratedSecrets()
	if err != nil || len(generated) != 0 {
		t.Fatalf("second ensureGeneratedSecrets() = %q, %v; want nothing generated", generated, err)
	}
	if second.Vault.EncryptionKey != first.Vault.EncryptionKey || second.Session.JWTSecret != first.Session.JWTSecret {
		t.Fatalf("second start got different secrets")
	}
	if first.Vault.EncryptionKey == mcpgate.Secret(first.Session.JWTSecret) {
		t.Fatalf("encryption key and JWT secret are the same")
	}

	// A given secret wins, and the other is still read from DATA_DIR.
	given := newKey(t)
	third := mustLoadConfig(t, nil, map[string]string{"DATA_DIR": dir, "JWT_SECRET": given})
	if _, err := third.ensureGeneratedSecrets(); err != nil {
		t.Fatalf("ensureGeneratedSecrets() err = %v", err)
	}
	if third.Session.JWTSecret.Reveal() != given || third.Vault.EncryptionKey != first.Vault.EncryptionKey {
		t.Fatalf("a given JWT_SECRET was not kept, or the stored key not read")
	}
}

func TestEnsureGeneratedSecrets_ExternalDatabase(t *testing.T) {
	dir := t.TempDir()
	c := mustLoadConfig(t, nil, map[string]string{"DATA_DIR": dir, "DATABASE_URL": "postgres://db/x",
		"ENCRYPTION_KEY": newKey(t), "JWT_SECRET": newKey(t)})
	if generated, err := c.ensureGeneratedSecrets(); err != nil || len(generated) != 0 {
		t.Fatalf("ensureGeneratedSecrets() = %q, %v; want nothing with DATABASE_URL", generated, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("DATA_DIR has %d files, want none", len(entries))
	}
}

// A secret file in DATA_DIR damaged by hand (or left empty by a crash) is
// refused, never used as it is.
func TestEnsureGeneratedSecrets_BadStoredSecret(t *testing.T) {
	tests := []struct {
		name, file, content string
	}{
		{name: "short encryption key", file: "encryption_key", content: base64.StdEncoding.EncodeToString(make([]byte, 16))},
		{name: "empty encryption key", file: "encryption_key", content: ""},
		{name: "short JWT secret", file: "jwt_secret", content: "tooshort\n"},
		{name: "empty JWT secret", file: "jwt_secret", content: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, tt.file), []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			c := mustLoadConfig(t, nil, map[string]string{"DATA_DIR": dir})
			var ce *ConfigError
			if _, err := c.ensureGeneratedSecrets(); !errors.As(err, &ce) {
				t.Fatalf("ensureGeneratedSecrets() err = %v, want a *ConfigError", err)
			}
		})
	}
}

func TestConfig_PrintingHidesSecrets(t *testing.T) {
	key, jwtSecret, dbPassword := newKey(t), newKey(t), "db-pass-Zq81kx"
	for _, dsn := range []string{
		"postgres://mcpgate:" + dbPassword + "@db.example.com:5432/mcpgate?sslmode=require",
		"postgres://db.example.com/mcpgate?user=mcpgate&password=" + dbPassword,
		"host=db.example.com user=mcpgate password=" + dbPassword + " dbname=mcpgate",
	} {
		c := mustLoadConfig(t, nil, map[string]string{"DATABASE_URL": dsn, "ENCRYPTION_KEY": key, "JWT_SECRET": jwtSecret})
		var out bytes.Buffer
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			fmt.Fprintf(&out, verb+"\n", c)
			fmt.Fprintf(&out, verb+"\n", *c)
		}
		slog.New(slog.NewJSONHandler(&out, nil)).Info("config", "config", c, "value", *c)
		slog.New(slog.NewTextHandler(&out, nil)).Info("config", "config", c, "value", *c)
		for name, secret := range map[string]string{"ENCRYPTION_KEY": key, "JWT_SECRET": jwtSecret, "DATABASE_URL password": dbPassword} {
			if strings.Contains(out.String(), secret) {
				t.Errorf("printed config shows %s:\n%s", name, out.String())
			}
		}
		if !strings.Contains(out.String(), "db.example.com") || !strings.Contains(out.String(), "http://localhost:8080") {
			t.Errorf("printed config lost the non-secret parts:\n%s", out.String())
		}
		if c.DB.URL != dsn {
			t.Errorf("printing changed DB.URL to %q", c.DB.URL)
		}
	}
}

func TestLoadConfig_AuditRetention(t *testing.T) {
	base := map[string]string{"DATA_DIR": t.TempDir()}
	for v, want := range map[string]time.Duration{"": 0, "90d": 90 * 24 * time.Hour, "1d": 24 * time.Hour, "720h": 720 * time.Hour} {
		c := mustLoadConfig(t, nil, mergeEnv(base, map[string]string{"AUDIT_RETENTION": v}))
		if got := c.Audit.Retention; got != want {
			t.Errorf("Audit.Retention with %q = %v, want %v", v, got, want)
		}
	}
	if c := mustLoadConfig(t, []string{"--audit-retention", "7d"}, base); c.Audit.Retention != 7*24*time.Hour {
		t.Errorf("--audit-retention 7d: Audit.Retention = %v", c.Audit.Retention)
	}
	// Every bad value is reported with the others, not on its own.
	for _, v := range []string{"90", "90m", "12h", "-3d", "1.5d", "d", "forever"} {
		_, err := LoadConfig(nil, envOf(mergeEnv(base, map[string]string{"AUDIT_RETENTION": v, "LOG_FORMAT": "xml"})))
		var ce *ConfigError
		if !errors.As(err, &ce) || len(ce.Problems) != 2 || !strings.Contains(ce.Error(), "AUDIT_RETENTION") {
			t.Errorf("AUDIT_RETENTION=%q: err = %v, want an AUDIT_RETENTION problem beside the LOG_FORMAT one", v, err)
		}
	}
}

func TestLoadConfig_RateLimits(t *testing.T) {
	base := map[string]string{"DATA_DIR": t.TempDir()}
	c := mustLoadConfig(t, nil, base)
	if got := [3]Limit{c.MCP.Key, c.MCP.User, c.MCP.Workspace}; got != [3]Limit{{20, 40}, {40, 200}, {100, 400}} {
		t.Fatalf("default limits = %v; want 20/40/100 per second, bursts 40/200/400", got)
	}
	c = mustLoadConfig(t, []string{"--mcp-key-rate", "2.5", "--mcp-key-burst", "5"},
		mergeEnv(base, map[string]string{"MCP_USER_RATE": "7", "MCP_USER_BURST": "9", "MCP_WORKSPACE_RATE": "0.5",
			"MCP_WORKSPACE_BURST": "11"}))
	if got := [3]Limit{c.MCP.Key, c.MCP.User, c.MCP.Workspace}; got != [3]Limit{{2.5, 5}, {7, 9}, {0.5, 11}} {
		t.Fatalf("limits = %v; want 2.5/7/0.5, 5/9/11", got)
	}
	for _, args := range [][]string{
		{"--mcp-key-rate", "0"}, {"--mcp-key-rate", "-1"}, {"--mcp-key-rate", "NaN"}, {"--mcp-key-rate", "fast"},
		{"--mcp-key-burst", "0"}, {"--mcp-key-burst", "1.5"},
		{"--mcp-user-rate", "0"}, {"--mcp-user-burst", "x"}, {"--mcp-workspace-rate", "-2"}, {"--mcp-workspace-burst", "0"},
	} {
		if _, err := LoadConfig(args, envOf(base)); err == nil {
			t.Errorf("LoadConfig(%q) err = nil, want a problem", args)
		}
	}
	// All at once, each named.
	_, err := LoadConfig([]string{"--mcp-user-rate", "0", "--mcp-workspace-burst", "0"}, envOf(base))
	if err == nil || !strings.Contains(err.Error(), "MCP_USER_RATE") || !strings.Contains(err.Error(), "MCP_WORKSPACE_BURST") {
		t.Errorf("two bad limits: err = %v, want both named", err)
	}
}

func TestLoadConfig_Mail(t *testing.T) {
	const smtpPassword = "smtp-pass-Qx71"
	smtpURL := "smtp://mailer:" + smtpPassword + "@mail.example.com:587"
	t.Run("verify defaults to required with SMTP_URL", func(t *testing.T) {
		c := mustLoadConfig(t, nil, map[string]string{"SMTP_URL": smtpURL, "MAIL_FROM": "mcpgate <noreply@example.com>"})
		if c.Mail.Verify != "required" {
			t.Fatalf("Mail.Verify = %q, want required", c.Mail.Verify)
		}
		o := c.mailOptions()
		if o == nil || o.Server.Host != "mail.example.com:587" || o.From != "mcpgate <noreply@example.com>" {
			t.Fatalf("mailOptions() = %+v", o)
		}
		var out bytes.Buffer
		fmt.Fprintf(&out, "%v %+v %#v", c, *c, o.Server)
		slog.New(slog.NewJSONHandler(&out, nil)).Info("config", "config", c, "server", o.Server)
		if strings.Contains(out.String(), smtpPassword) {
			t.Fatalf("printed config shows the SMTP password:\n%s", out.String())
		}
	})
	t.Run("SMTP_URL_FILE", func(t *testing.T) {
		c := mustLoadConfig(t, nil, map[string]string{"SMTP_URL_FILE": mustFile(t, smtpURL), "MAIL_FROM": "noreply@example.com", "SIGNUP_VERIFY": "off"})
		if c.mailOptions() == nil || c.Mail.Verify != "off" {
			t.Fatalf("mailOptions() = nil or verify %q", c.Mail.Verify)
		}
	})
	t.Run("no mail", func(t *testing.T) {
		if c := mustLoadConfig(t, nil, nil); c.mailOptions() != nil {
			t.Fatal("mailOptions() without SMTP_URL")
		}
	})
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{name: "no MAIL_FROM", env: map[string]string{"SMTP_URL": smtpURL}, want: []string{"MAIL_FROM is required"}},
		{name: "bad values", env: map[string]string{"SMTP_URL": "http://" + smtpPassword + "@x", "MAIL_FROM": "nope", "SIGNUP_VERIFY": "maybe"},
			want: []string{"SMTP_URL must start with smtp://", "MAIL_FROM", "SIGNUP_VERIFY must be required or off"}},
		{name: "required without SMTP", env: map[string]string{"SIGNUP_VERIFY": "required"}, want: []string{"SIGNUP_VERIFY=required needs SMTP_URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig(nil, envOf(tt.env))
			if err == nil {
				t.Fatal("LoadConfig() err = nil")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("LoadConfig() err = %v, want it to say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), smtpPassword) {
				t.Errorf("error repeats the SMTP password: %v", err)
			}
		})
	}
}

// TestLoadConfig_DatabaseMaxConns: the pool's size is a setting; unset, the
// store sizes it from the machine; a bad value is reported with every other
// problem.
func TestLoadConfig_DatabaseMaxConns(t *testing.T) {
	base := map[string]string{"DATA_DIR": t.TempDir()}
	if c := mustLoadConfig(t, nil, base); c.DB.MaxConns != 0 {
		t.Errorf("DB.MaxConns unset = %d, want 0 (sized by the store)", c.DB.MaxConns)
	}
	if c := mustLoadConfig(t, nil, mergeEnv(base, map[string]string{"DATABASE_MAX_CONNS": "40"})); c.DB.MaxConns != 40 {
		t.Errorf("DB.MaxConns = %d, want 40", c.DB.MaxConns)
	}
	if c := mustLoadConfig(t, []string{"--database-max-conns", "12"}, base); c.DB.MaxConns != 12 {
		t.Errorf("--database-max-conns 12: DB.MaxConns = %d", c.DB.MaxConns)
	}
	for _, v := range []string{"0", "3", "-8", "1001", "many", "8.5"} {
		_, err := LoadConfig(nil, envOf(mergeEnv(base, map[string]string{"DATABASE_MAX_CONNS": v, "LOG_FORMAT": "xml"})))
		var ce *ConfigError
		if !errors.As(err, &ce) || len(ce.Problems) != 2 || !strings.Contains(ce.Error(), "DATABASE_MAX_CONNS") {
			t.Errorf("DATABASE_MAX_CONNS=%q: err = %v, want a DATABASE_MAX_CONNS problem beside the LOG_FORMAT one", v, err)
		}
	}
}

// Every default in the settings table parses on its own, and what it parses
// to is the value the packages that enforce the limits default to, so a
// test or benchmark that builds them directly sees the same numbers.
func TestSettings_DefaultsParse(t *testing.T) {
	var c Config
	for _, s := range c.settings(false) {
		if err := s.parse(s.def); err != nil {
			t.Errorf("%s: default %q does not parse: %v", s.env, s.def, err)
		}
	}
	got := [3]Limit{c.MCP.Key, c.MCP.User, c.MCP.Workspace}
	want := [3]Limit{{mcp.DefaultKeyRate, mcp.DefaultKeyBurst}, {mcp.DefaultUserRate, mcp.DefaultUserBurst},
		{mcp.DefaultWorkspaceRate, mcp.DefaultWorkspaceBurst}}
	if got != want {
		t.Errorf("default limits = %v, want mcp's %v", got, want)
	}
	if c.Caps.KeysPerUser != service.DefaultMaxKeysPerUser || c.Caps.WorkspacesPerUser != service.DefaultMaxWorkspacesPerUser ||
		c.MCP.OutageGrace != service.DefaultOutageGrace {
		t.Errorf("default caps %d, %d and grace %v, want the service's %d, %d and %v", c.Caps.KeysPerUser,
			c.Caps.WorkspacesPerUser, c.MCP.OutageGrace, service.DefaultMaxKeysPerUser, service.DefaultMaxWorkspacesPerUser,
			service.DefaultOutageGrace)
	}
	if diff := cmp.Diff(wantConfig(), &c, cmpConfig); diff != "" {
		t.Errorf("the defaults parsed one by one differ from LoadConfig's (-want +got):\n%s", diff)
	}
}

// LoadConfig hands over every setting already typed: each given value is in
// its field after the one parse, so nothing later has to read text again.
func TestLoadConfig_EveryValueTyped(t *testing.T) {
	key, jwtSecret := newKey(t), newKey(t)
	c := mustLoadConfig(t, []string{"--mcp-workspace-burst", "12"}, map[string]string{
		"PUBLIC_URL": "https://gw.example.com/", "DATABASE_URL": "postgres://db/x", "DATABASE_MAX_CONNS": "24",
		"ENCRYPTION_KEY": key, "JWT_SECRET": jwtSecret, "SMTP_URL": "smtp://u:p@mail.example.com",
		"MAIL_FROM": "noreply@example.com", "MCP_KEY_RATE": "3", "MCP_USER_BURST": "7", "OUTAGE_GRACE": "0",
		"TRUSTED_PROXIES": "10.0.0.0/8", "ALLOWED_ORIGINS": "https://a.example.com, https://b.example.com",
		"MAX_KEYS_PER_USER": "5", "MAX_WORKSPACES_PER_USER": "6", "AUDIT_RETENTION": "30d", "LOG_LEVEL": "warn",
	})
	got := []any{c.HTTP.PublicURL, c.DB.MaxConns, c.Mail.Server.Host, c.Mail.Verify, c.MCP.Key.Rate, c.MCP.User.Burst,
		c.MCP.Workspace.Burst, c.MCP.OutageGrace, c.Proxy.Trusted.String(), c.Proxy.AllowedOrigins, c.Caps.KeysPerUser,
		c.Caps.WorkspacesPerUser, c.Audit.Retention, c.LogLevel}
	want := []any{"https://gw.example.com", int32(24), "mail.example.com:587", "required", rate.Limit(3), 7,
		12, time.Duration(-1), "10.0.0.0/8", []string{"https://a.example.com", "https://b.example.com"}, 5,
		6, 30 * 24 * time.Hour, slog.LevelWarn}
	if diff := cmp.Diff(want, got, cmpConfig); diff != "" {
		t.Errorf("typed fields after LoadConfig (-want +got):\n%s", diff)
	}
}
