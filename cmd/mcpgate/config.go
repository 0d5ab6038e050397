package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	netmail "net/mail"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"golang.org/x/time/rate"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/httpx"
	"github.com/mcpgate/mcpgate/internal/mail"
	"github.com/mcpgate/mcpgate/internal/netguard"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/mcp"
	"github.com/mcpgate/mcpgate/vault"
)

// Config is everything `mcpgate serve` reads from flags and the environment.
// Secrets are mcpgate.Secret, so printing a Config never shows them.
type Config struct {
	HTTP struct {
		ListenAddr string
		PublicURL  string
	}
	DB struct {
		URL     string
		DataDir string
		// MaxConns is DATABASE_MAX_CONNS as given; see DBMaxConns.
		MaxConns string
	}
	Vault struct {
		EncryptionKey mcpgate.Secret
	}
	Session struct {
		JWTSecret mcpgate.Secret
		Signup    string
	}
	// Mail is outgoing email; SMTPURL holds the SMTP password.
	Mail struct {
		SMTPURL mcpgate.Secret
		From    string
		// Verify is SIGNUP_VERIFY: required (the default with SMTP_URL) or off.
		Verify string
	}
	E2B struct {
		APIURL          string
		DashboardAPIURL string
	}
	MCP struct {
		// The tool-call limits per key, per person (all their keys and
		// grants) and per workspace (all its people), shared out among the
		// replicas; see RateLimits.
		KeyRate, KeyBurst             string
		UserRate, UserBurst           string
		WorkspaceRate, WorkspaceBurst string
		// OutageGrace is how long cached keys, policies and credentials
		// stand in while the database cannot be reached.
		OutageGrace string
	}
	Proxy struct {
		// Trusted is TRUSTED_PROXIES; see TrustedProxies.
		Trusted string
		// AllowedOrigins is ALLOWED_ORIGINS; see Origins.
		AllowedOrigins string
		// PrivateNetworks is UPSTREAM_PRIVATE_NETWORKS; see PrivateNetworks.
		PrivateNetworks string
	}
	// Caps are MAX_KEYS_PER_USER and MAX_WORKSPACES_PER_USER; see UserCaps.
	Caps struct {
		KeysPerUser       string
		WorkspacesPerUser string
	}
	Audit struct {
		// Retention is AUDIT_RETENTION as given ("90d", "720h"); empty keeps
		// everything.
		Retention string
	}
	LogFormat string
	LogLevel  string
}

// OutageGrace returns OUTAGE_GRACE as the services take it: negative when
// it is 0, which turns serving through an outage off. Valid after
// LoadConfig.
func (c *Config) OutageGrace() time.Duration {
	d, _ := time.ParseDuration(c.MCP.OutageGrace)
	if d == 0 {
		return -1
	}
	return d
}

// rateLimit is one tool-call limit as configured: calls per second and
// burst, and the prefix of their variables.
type rateLimit struct {
	env         string // MCP_KEY: MCP_KEY_RATE and MCP_KEY_BURST
	rate, burst *string
}

func (c *Config) rateLimits() []rateLimit {
	return []rateLimit{{"MCP_KEY", &c.MCP.KeyRate, &c.MCP.KeyBurst}, {"MCP_USER", &c.MCP.UserRate, &c.MCP.UserBurst},
		{"MCP_WORKSPACE", &c.MCP.WorkspaceRate, &c.MCP.WorkspaceBurst}}
}

// RateLimits returns the per-key, per-person and per-workspace tool-call
// limits: calls per second and bursts. Valid after LoadConfig.
func (c *Config) RateLimits() (rates [3]rate.Limit, bursts [3]int) {
	for i, l := range c.rateLimits() {
		r, _ := strconv.ParseFloat(*l.rate, 64)
		rates[i] = rate.Limit(r)
		bursts[i], _ = strconv.Atoi(*l.burst)
	}
	return rates, bursts
}

// TrustedProxies returns the proxies whose forwarding headers give the
// client address. Valid after LoadConfig.
func (c *Config) TrustedProxies() *httpx.Proxies {
	p, _ := httpx.ParseProxies(c.Proxy.Trusted)
	return p
}

// UserCaps returns the caps on keys and workspaces per person. Valid after
// LoadConfig.
func (c *Config) UserCaps() (keys, workspaces int) {
	keys, _ = strconv.Atoi(c.Caps.KeysPerUser)
	workspaces, _ = strconv.Atoi(c.Caps.WorkspacesPerUser)
	return keys, workspaces
}

// PrivateNetworks returns UPSTREAM_PRIVATE_NETWORKS: the inner networks
// that outgoing calls (approval webhooks) may reach besides public
// addresses. Valid after LoadConfig.
func (c *Config) PrivateNetworks() []netip.Prefix {
	nets, _ := netguard.ParseNetworks(c.Proxy.PrivateNetworks)
	return nets
}

// Origins returns ALLOWED_ORIGINS as a list.
func (c *Config) Origins() []string {
	return strings.FieldsFunc(c.Proxy.AllowedOrigins, func(r rune) bool { return r == ',' || r == ' ' })
}

// AuditRetention returns how long audit rows are kept, 0 for ever. Valid
// after LoadConfig.
func (c *Config) AuditRetention() time.Duration {
	d, _ := parseRetention(c.Audit.Retention)
	return d
}

// parseRetention reads a retention: whole days ("90d") or a Go duration
// ("2160h"); empty is 0, keep everything. Less than a day is refused: the log
// is dropped by day partitions, and a typo such as "90m" must not erase it.
func parseRetention(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 || days > 100*365 {
			return 0, errors.New("not a whole number of days")
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, errors.New("not a duration")
		}
	}
	if d < 24*time.Hour {
		return 0, errors.New("shorter than a day")
	}
	return d, nil
}

// DBMaxConns returns DATABASE_MAX_CONNS, 0 when unset (the store then
// sizes the pool from the machine). Valid after LoadConfig.
func (c *Config) DBMaxConns() int32 {
	n, _ := strconv.Atoi(c.DB.MaxConns)
	return int32(n)
}

// Embedded reports whether serve runs its own PostgreSQL.
func (c *Config) Embedded() bool { return c.DB.URL == "" }

// LogValue keeps secrets out of logs even if the whole config is logged.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("listen_addr", c.HTTP.ListenAddr), slog.String("public_url", c.HTTP.PublicURL),
		slog.Bool("embedded_db", c.Embedded()), slog.String("data_dir", c.DB.DataDir),
		slog.String("signup", c.Session.Signup), slog.String("e2b_api_url", c.E2B.APIURL),
		slog.Bool("smtp", c.Mail.SMTPURL.Reveal() != ""), slog.String("signup_verify", c.Mail.Verify),
		slog.String("trusted_proxies", c.Proxy.Trusted),
		slog.String("audit_retention", c.Audit.Retention))
}

// Format prints the configuration with its secrets hidden: the Secret fields
// redact themselves, and DATABASE_URL may carry a password.
func (c Config) Format(f fmt.State, verb rune) {
	type plain Config
	p := plain(c)
	p.DB.URL = redactDSN(p.DB.URL)
	fmt.Fprintf(f, fmt.FormatString(f, verb), p)
}

var dsnPassword = regexp.MustCompile(`(?i)(password=)[^&\s]*`)

// redactDSN hides the password of a PostgreSQL URL or keyword/value string.
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		dsn = u.Redacted()
	}
	return dsnPassword.ReplaceAllString(dsn, "${1}[redacted]")
}

// setting is one configuration value: its flag, its environment variable, its
// default, and whether it is a secret (which also accepts NAME_FILE).
type setting struct {
	flag, env, def, usage string
	secret                bool
	dst                   *string
}

func (c *Config) settings() []setting {
	return []setting{
		{"listen", "LISTEN_ADDR", ":8080", "address to listen on", false, &c.HTTP.ListenAddr},
		{"public-url", "PUBLIC_URL", "http://localhost:8080", "URL users reach the gateway at (connector URLs, cookies)", false, &c.HTTP.PublicURL},
		{"database-url", "DATABASE_URL", "", "PostgreSQL URL; empty runs an embedded PostgreSQL under the data dir", true, &c.DB.URL},
		{"database-max-conns", "DATABASE_MAX_CONNS", "", "database pool size; empty sizes it from the machine (4 per CPU, 16 to 64)", false, &c.DB.MaxConns},
		{"data-dir", "DATA_DIR", "./data", "directory for the embedded database and generated secrets", false, &c.DB.DataDir},
		{"encryption-key", "ENCRYPTION_KEY", "", "vault root key: 32 random bytes, base64", true, (*string)(&c.Vault.EncryptionKey)},
		{"jwt-secret", "JWT_SECRET", "", "dashboard session signing secret, at least 32 bytes", true, (*string)(&c.Session.JWTSecret)},
		{"signup", "SIGNUP", "open", "who may sign up: open or invite", false, &c.Session.Signup},
		{"smtp-url", "SMTP_URL", "", "outgoing mail server: smtp://user:pass@host:587 (STARTTLS) or smtps://user:pass@host:465; empty: no email", true, (*string)(&c.Mail.SMTPURL)},
		{"mail-from", "MAIL_FROM", "", "sender of the gateway's email, e.g. mcpgate <noreply@example.com> (required with SMTP_URL)", false, &c.Mail.From},
		{"signup-verify", "SIGNUP_VERIFY", "", "required or off: whether a new email must be verified before invitations and keys (default required with SMTP_URL)", false, &c.Mail.Verify},
		{"e2b-api-url", "E2B_API_URL", "https://api.e2b.app", "E2B control-plane API", false, &c.E2B.APIURL},
		{"e2b-dashboard-api-url", "E2B_DASHBOARD_API_URL", "https://dashboard-api.e2b.app", "E2B dashboard API (default templates)", false, &c.E2B.DashboardAPIURL},
		{"mcp-key-rate", "MCP_KEY_RATE", "20", "MCP tool calls per second allowed per key", false, &c.MCP.KeyRate},
		{"mcp-key-burst", "MCP_KEY_BURST", "40", "MCP tool calls per key allowed in a burst", false, &c.MCP.KeyBurst},
		// A person's and a workspace's bursts are five times a key's and
		// more, so that one busy client meets its key's limit first and the
		// person's (or the team's) other clients keep working.
		{"mcp-user-rate", "MCP_USER_RATE", "40", "MCP tool calls per second allowed per person, all their keys and apps together", false, &c.MCP.UserRate},
		{"mcp-user-burst", "MCP_USER_BURST", "200", "MCP tool calls per person allowed in a burst", false, &c.MCP.UserBurst},
		{"mcp-workspace-rate", "MCP_WORKSPACE_RATE", "100", "MCP tool calls per second allowed per workspace, all its people together", false, &c.MCP.WorkspaceRate},
		{"mcp-workspace-burst", "MCP_WORKSPACE_BURST", "400", "MCP tool calls per workspace allowed in a burst", false, &c.MCP.WorkspaceBurst},
		{"trusted-proxies", "TRUSTED_PROXIES", "", "CIDRs of reverse proxies whose X-Forwarded-For/Forwarded give the client address (comma-separated)", false, &c.Proxy.Trusted},
		{"upstream-private-networks", "UPSTREAM_PRIVATE_NETWORKS", "", "CIDRs of inner networks the gateway may call out to (approval webhooks), also over plain http (comma-separated)", false, &c.Proxy.PrivateNetworks},
		{"allowed-origins", "ALLOWED_ORIGINS", "", "browser origins allowed on /mcp besides PUBLIC_URL's (comma-separated)", false, &c.Proxy.AllowedOrigins},
		{"max-keys-per-user", "MAX_KEYS_PER_USER", "100", "working MCP keys one person may hold", false, &c.Caps.KeysPerUser},
		{"max-workspaces-per-user", "MAX_WORKSPACES_PER_USER", "20", "shared workspaces one person may own", false, &c.Caps.WorkspacesPerUser},
		{"outage-grace", "OUTAGE_GRACE", "10m", "how long cached keys, policies and credentials serve while the database is unreachable (0: not at all)", false, &c.MCP.OutageGrace},
		{"audit-retention", "AUDIT_RETENTION", "", "how long audit rows are kept, e.g. 90d; empty keeps everything", false, &c.Audit.Retention},
		{"log-format", "LOG_FORMAT", "json", "json or text", false, &c.LogFormat},
		{"log-level", "LOG_LEVEL", "info", "debug, info, warn or error", false, &c.LogLevel},
	}
}

// LoadConfig reads serve's flags, then the environment for every flag not
// given, then NAME_FILE for secrets. It reports every problem at once.
func LoadConfig(args []string, getenv func(string) string) (*Config, error) {
	return loadConfig("serve", args, getenv, true)
}

// loadConfig is LoadConfig for a command; needSecrets is false for commands
// that never seal, open or sign anything (migrate).
func loadConfig(command string, args []string, getenv func(string) string, needSecrets bool) (*Config, error) {
	c := &Config{}
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	set := map[string]bool{}
	for _, s := range c.settings() {
		fs.StringVar(s.dst, s.flag, s.def, s.usage+" (env "+s.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, usage(fs))
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var problems []string
	for _, s := range c.settings() {
		if set[s.flag] {
			continue
		}
		v := getenv(s.env)
		if s.secret {
			if path := getenv(s.env + "_FILE"); path != "" {
				if v != "" {
					problems = append(problems, fmt.Sprintf("%s and %s_FILE are both set; set one", s.env, s.env))
				}
				b, err := os.ReadFile(path)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s_FILE: cannot read %s: %v", s.env, path, errors.Unwrap(err)))
				}
				v = strings.TrimSpace(string(b))
			}
		}
		if v != "" {
			*s.dst = v
		}
	}
	problems = append(problems, c.validate(needSecrets)...)
	if len(problems) > 0 {
		return nil, &ConfigError{Problems: problems}
	}
	return c, nil
}

func usage(fs *flag.FlagSet) string {
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	return b.String()
}

// ConfigError lists every configuration problem found.
type ConfigError struct{ Problems []string }

// Error lists the problems, one a line.
func (e *ConfigError) Error() string {
	return "invalid configuration:\n  - " + strings.Join(e.Problems, "\n  - ")
}

// placeholders are values copied from examples that must never be used.
var placeholders = []string{"changeme", "change-me", "change_me", "secret", "password", "example", "your-", "replace"}

// placeholderWords are too short to look for inside a value: a random base64
// key spells "xxx" in some letter case about once in 800. They count only as
// whole words.
var placeholderWords = []string{"xxx", "todo"}

func isPlaceholder(v string) bool {
	l := strings.ToLower(v)
	for _, p := range placeholders {
		if strings.Contains(l, p) {
			return true
		}
	}
	words := strings.FieldsFunc(l, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for _, w := range words {
		if slices.Contains(placeholderWords, w) {
			return true
		}
	}
	// A handful of characters repeated ("aaaa…", "0000…", "xxxx-xxxx…") is
	// not random.
	distinct := map[rune]bool{}
	for _, r := range l {
		distinct[r] = true
	}
	return len(distinct) < 8
}

// validate checks values; the secrets are checked here only when present,
// since embedded mode may still generate them.
func (c *Config) validate(needSecrets bool) []string {
	var p []string
	if _, _, err := net.SplitHostPort(c.HTTP.ListenAddr); err != nil {
		p = append(p, fmt.Sprintf("LISTEN_ADDR %q is not host:port", c.HTTP.ListenAddr))
	}
	p = append(p, checkURL("PUBLIC_URL", c.HTTP.PublicURL)...)
	p = append(p, checkURL("E2B_API_URL", c.E2B.APIURL)...)
	p = append(p, checkURL("E2B_DASHBOARD_API_URL", c.E2B.DashboardAPIURL)...)
	c.HTTP.PublicURL = strings.TrimRight(c.HTTP.PublicURL, "/")
	if c.DB.URL != "" {
		if _, err := url.Parse(c.DB.URL); err != nil && !strings.Contains(c.DB.URL, "=") {
			p = append(p, "DATABASE_URL is not a valid PostgreSQL URL")
		}
	} else if c.DB.DataDir == "" {
		p = append(p, "DATA_DIR must be set when DATABASE_URL is not")
	}
	if n, err := strconv.Atoi(c.DB.MaxConns); c.DB.MaxConns != "" && (err != nil || n < store.MinMaxConns || n > 1000) {
		p = append(p, fmt.Sprintf("DATABASE_MAX_CONNS must be a whole number from %d to 1000, or empty to size the pool from the machine, not %q",
			store.MinMaxConns, c.DB.MaxConns))
	}
	if c.Session.Signup != "open" && c.Session.Signup != "invite" {
		p = append(p, fmt.Sprintf("SIGNUP must be open or invite, not %q", c.Session.Signup))
	}
	p = append(p, c.validateMail()...)
	if c.LogFormat != "json" && c.LogFormat != "text" {
		p = append(p, fmt.Sprintf("LOG_FORMAT must be json or text, not %q", c.LogFormat))
	}
	for _, l := range c.rateLimits() {
		if r, err := strconv.ParseFloat(*l.rate, 64); err != nil || !(r > 0) || r > 1e9 {
			p = append(p, fmt.Sprintf("%s_RATE must be a positive number of calls per second, not %q", l.env, *l.rate))
		}
		if b, err := strconv.Atoi(*l.burst); err != nil || b < 1 || b > 1e9 {
			p = append(p, fmt.Sprintf("%s_BURST must be a whole number of at least 1, not %q", l.env, *l.burst))
		}
	}
	if d, err := time.ParseDuration(c.MCP.OutageGrace); err != nil || d < 0 || d > 24*time.Hour {
		p = append(p, fmt.Sprintf("OUTAGE_GRACE must be a duration from 0 to 24h such as 10m, not %q", c.MCP.OutageGrace))
	}
	if _, err := httpx.ParseProxies(c.Proxy.Trusted); err != nil {
		p = append(p, "TRUSTED_PROXIES: "+err.Error()+" (write CIDRs such as 10.0.0.0/8,172.16.0.0/12)")
	}
	if _, err := netguard.ParseNetworks(c.Proxy.PrivateNetworks); err != nil {
		p = append(p, "UPSTREAM_PRIVATE_NETWORKS: "+err.Error()+" (write CIDRs such as 10.20.0.0/16)")
	}
	for _, cp := range []struct{ name, v string }{{"MAX_KEYS_PER_USER", c.Caps.KeysPerUser},
		{"MAX_WORKSPACES_PER_USER", c.Caps.WorkspacesPerUser}} {
		if n, err := strconv.Atoi(cp.v); err != nil || n < 1 || n > 1e6 {
			p = append(p, fmt.Sprintf("%s must be a whole number of at least 1, not %q", cp.name, cp.v))
		}
	}
	for _, o := range c.Origins() {
		if u, err := url.Parse(o); err != nil || mcp.OriginOf(o) == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			p = append(p, fmt.Sprintf("ALLOWED_ORIGINS: %q is not an origin such as https://app.example.com", o))
		}
	}
	if _, err := parseRetention(c.Audit.Retention); err != nil {
		p = append(p, fmt.Sprintf("AUDIT_RETENTION must be a number of days such as 90d (at least 1d), or empty to keep everything, not %q: %v", c.Audit.Retention, err))
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		p = append(p, err.Error())
	}
	if k := c.Vault.EncryptionKey.Reveal(); k != "" {
		p = append(p, checkRootKey("ENCRYPTION_KEY", k)...)
	} else if needSecrets && !c.Embedded() {
		p = append(p, "ENCRYPTION_KEY is required with DATABASE_URL (generate one: openssl rand -base64 32)")
	}
	if s := c.Session.JWTSecret.Reveal(); s != "" {
		if len(s) < 32 {
			p = append(p, "JWT_SECRET must be at least 32 bytes (generate one: openssl rand -base64 32)")
		} else if isPlaceholder(s) {
			p = append(p, "JWT_SECRET looks like a placeholder; generate one: openssl rand -base64 32")
		}
	} else if needSecrets && !c.Embedded() {
		p = append(p, "JWT_SECRET is required with DATABASE_URL (generate one: openssl rand -base64 32)")
	}
	return p
}

func checkRootKey(name, v string) []string {
	if isPlaceholder(v) {
		return []string{name + " looks like a placeholder; generate one: openssl rand -base64 32"}
	}
	if _, err := vault.ParseRootKey(v); err != nil {
		return []string{name + " must be 32 random bytes, base64-encoded (generate one: openssl rand -base64 32)"}
	}
	return nil
}

func checkURL(name, v string) []string {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return []string{fmt.Sprintf("%s %q must be an http or https URL", name, v)}
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("LOG_LEVEL must be debug, info, warn or error, not %q", s)
	}
	return l, nil
}

// ensureGeneratedSecrets fills missing secrets in embedded mode from files in
// DATA_DIR, generating them once (mode 0600). It returns the names of the
// secrets it generated, for the log.
func (c *Config) ensureGeneratedSecrets() ([]string, error) {
	if !c.Embedded() {
		return nil, nil
	}
	if err := os.MkdirAll(c.DB.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	var generated []string
	for _, s := range []struct {
		name string
		dst  *mcpgate.Secret
	}{{"encryption_key", &c.Vault.EncryptionKey}, {"jwt_secret", &c.Session.JWTSecret}} {
		if s.dst.Reveal() != "" {
			continue
		}
		path := filepath.Join(c.DB.DataDir, s.name)
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			raw := make([]byte, 32)
			if _, err := rand.Read(raw); err != nil {
				return nil, err
			}
			b = []byte(base64.StdEncoding.EncodeToString(raw) + "\n")
			// O_EXCL: two processes racing on a fresh DATA_DIR cannot both
			// write a different key.
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return nil, fmt.Errorf("write %s: %w", path, err)
			}
			if _, err := f.Write(b); err != nil {
				f.Close()
				return nil, fmt.Errorf("write %s: %w", path, err)
			}
			if err := f.Close(); err != nil {
				return nil, err
			}
			generated = append(generated, path)
		} else if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		*s.dst = mcpgate.Secret(strings.TrimSpace(string(b)))
	}
	// The stored files may have been edited, or left empty by a crash.
	p := checkRootKey("generated encryption_key", c.Vault.EncryptionKey.Reveal())
	if s := c.Session.JWTSecret.Reveal(); len(s) < 32 || isPlaceholder(s) {
		p = append(p, "generated jwt_secret in DATA_DIR is shorter than 32 bytes or not random; "+
			"delete it to generate a new one (this ends every session)")
	}
	if len(p) > 0 {
		return nil, &ConfigError{Problems: p}
	}
	return generated, nil
}

// validateMail checks SMTP_URL, MAIL_FROM and SIGNUP_VERIFY and settles
// SIGNUP_VERIFY's default. No message repeats SMTP_URL, which holds a
// password.
func (c *Config) validateMail() []string {
	var p []string
	raw := c.Mail.SMTPURL.Reveal()
	if raw != "" {
		if _, err := mail.ParseURL(raw); err != nil {
			p = append(p, err.Error())
		}
		if c.Mail.From == "" {
			p = append(p, "MAIL_FROM is required with SMTP_URL, e.g. mcpgate <noreply@example.com>")
		} else if _, err := netmail.ParseAddress(c.Mail.From); err != nil {
			p = append(p, fmt.Sprintf("MAIL_FROM %q is not an email address", c.Mail.From))
		}
	}
	switch c.Mail.Verify {
	case "":
		c.Mail.Verify = "off"
		if raw != "" {
			c.Mail.Verify = "required"
		}
	case "off":
	case "required":
		if raw == "" {
			p = append(p, "SIGNUP_VERIFY=required needs SMTP_URL: verification links are sent by email")
		}
	default:
		p = append(p, fmt.Sprintf("SIGNUP_VERIFY must be required or off, not %q", c.Mail.Verify))
	}
	return p
}

// mailOptions returns the mailer's options, or nil without SMTP_URL. Valid
// after LoadConfig.
func (c *Config) mailOptions() *mail.Options {
	srv, err := mail.ParseURL(c.Mail.SMTPURL.Reveal())
	if c.Mail.SMTPURL.Reveal() == "" || err != nil {
		return nil
	}
	return &mail.Options{Server: srv, From: c.Mail.From}
}
