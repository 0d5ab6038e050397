package main

import (
	"cmp"
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
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/mcp"
	"github.com/mcpgate/mcpgate/vault"
)

// Config is everything `mcpgate serve` reads from flags and the environment,
// parsed: LoadConfig reads each setting's text once, turns it into the typed
// value the rest of the program takes, and refuses the whole configuration
// if any setting is wrong, so nothing later parses it again or meets a bad
// value. Secrets are mcpgate.Secret, so printing a Config never shows them.
type Config struct {
	HTTP struct {
		ListenAddr string
		// PublicURL has no trailing slash.
		PublicURL string
	}
	DB struct {
		URL     string
		DataDir string
		// MaxConns is the pool's size; 0 lets the store size it from the
		// machine.
		MaxConns int32
	}
	Vault struct {
		EncryptionKey mcpgate.Secret
	}
	Session struct {
		JWTSecret mcpgate.Secret
		Signup    string
	}
	// Mail is outgoing email.
	Mail struct {
		// Server is SMTP_URL parsed (it holds the password, as a Secret);
		// nil without SMTP_URL.
		Server *mail.Server
		From   string
		// Verify is SIGNUP_VERIFY settled: required (the default with
		// SMTP_URL) or off.
		Verify string
	}
	E2B struct {
		APIURL          string
		DashboardAPIURL string
	}
	MCP struct {
		// The tool-call limits per key, per person (all their keys and
		// grants) and per workspace (all its people), shared out among the
		// replicas.
		Key, User, Workspace Limit
		// OutageGrace is how long cached keys, policies and credentials
		// stand in while the database cannot be reached, as the services
		// take it: negative when OUTAGE_GRACE is 0 (their zero means their
		// default).
		OutageGrace time.Duration
	}
	Proxy struct {
		// Trusted are the proxies whose forwarding headers give the client
		// address (TRUSTED_PROXIES).
		Trusted *httpx.Proxies
		// AllowedOrigins are the browser origins allowed on /mcp besides
		// PUBLIC_URL's (ALLOWED_ORIGINS); nil when none.
		AllowedOrigins []string
		// PrivateNetworks are the inner networks outgoing calls (approval
		// webhooks) may reach besides public addresses, also over plain
		// http (UPSTREAM_PRIVATE_NETWORKS); nil when none.
		PrivateNetworks []netip.Prefix
	}
	// Caps are what one person may hold: working MCP keys and shared
	// workspaces.
	Caps struct {
		KeysPerUser       int
		WorkspacesPerUser int
	}
	Audit struct {
		// Retention is how long audit rows are kept; 0 keeps everything.
		Retention time.Duration
	}
	LogFormat string
	LogLevel  slog.Level
}

// Limit is one tool-call limit: calls per second, and how many may come at
// once.
type Limit struct {
	Rate  rate.Limit
	Burst int
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

// Embedded reports whether serve runs its own PostgreSQL.
func (c *Config) Embedded() bool { return c.DB.URL == "" }

// LogValue keeps secrets out of logs even if the whole config is logged.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("listen_addr", c.HTTP.ListenAddr), slog.String("public_url", c.HTTP.PublicURL),
		slog.Bool("embedded_db", c.Embedded()), slog.String("data_dir", c.DB.DataDir),
		slog.String("signup", c.Session.Signup), slog.String("e2b_api_url", c.E2B.APIURL),
		slog.Bool("smtp", c.Mail.Server != nil), slog.String("signup_verify", c.Mail.Verify),
		slog.String("trusted_proxies", c.Proxy.Trusted.String()),
		slog.String("audit_retention", c.Audit.Retention.String()))
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
// default as text, and whether it is a secret (which also accepts NAME_FILE).
// parse turns the text into the Config's typed field, or says what is wrong
// with it; the default goes through it like any given value.
type setting struct {
	flag, env, def, usage string
	secret                bool
	parse                 func(v string) error
}

// settings is the one table of serve's configuration: every flag, variable
// and default. The defaults of the limits are the constants of the packages
// that enforce them, so that a test building those packages directly gets
// the same numbers. A setting's parse may read the settings above it
// (MAIL_FROM reads SMTP_URL, the secrets DATABASE_URL), and problems are
// reported in the table's order. needSecrets is false for commands that
// never seal, open or sign anything (migrate). A table is parsed once: its
// parse functions record what they saw (SMTP_URL given, the origins).
func (c *Config) settings(needSecrets bool) []setting {
	p := &parser{c: c, needSecrets: needSecrets}
	return []setting{
		{"listen", "LISTEN_ADDR", ":8080", "address to listen on", false, p.listenAddr},
		{"public-url", "PUBLIC_URL", "http://localhost:8080", "URL users reach the gateway at (connector URLs, cookies)", false, p.publicURL},
		{"e2b-api-url", "E2B_API_URL", "https://api.e2b.app", "E2B control-plane API", false, httpURL("E2B_API_URL", &c.E2B.APIURL)},
		{"e2b-dashboard-api-url", "E2B_DASHBOARD_API_URL", "https://dashboard-api.e2b.app", "E2B dashboard API (default templates)", false, httpURL("E2B_DASHBOARD_API_URL", &c.E2B.DashboardAPIURL)},
		{"database-url", "DATABASE_URL", "", "PostgreSQL URL; empty runs an embedded PostgreSQL under the data dir", true, p.databaseURL},
		{"data-dir", "DATA_DIR", "./data", "directory for the embedded database and generated secrets", false, p.dataDir},
		{"database-max-conns", "DATABASE_MAX_CONNS", "", "database pool size; empty sizes it from the machine (4 per CPU, 16 to 64)", false, p.maxConns},
		{"signup", "SIGNUP", "open", "who may sign up: open or invite", false, oneOf("SIGNUP", &c.Session.Signup, "open", "invite")},
		{"smtp-url", "SMTP_URL", "", "outgoing mail server: smtp://user:pass@host:587 (STARTTLS) or smtps://user:pass@host:465; empty: no email", true, p.smtpURL},
		{"mail-from", "MAIL_FROM", "", "sender of the gateway's email, e.g. mcpgate <noreply@example.com> (required with SMTP_URL)", false, p.mailFrom},
		{"signup-verify", "SIGNUP_VERIFY", "", "required or off: whether a new email must be verified before invitations and keys (default required with SMTP_URL)", false, p.signupVerify},
		{"log-format", "LOG_FORMAT", "json", "json or text", false, oneOf("LOG_FORMAT", &c.LogFormat, "json", "text")},
		{"mcp-key-rate", "MCP_KEY_RATE", formatRate(mcp.DefaultKeyRate), "MCP tool calls per second allowed per key", false, parseRate("MCP_KEY", &c.MCP.Key)},
		{"mcp-key-burst", "MCP_KEY_BURST", strconv.Itoa(mcp.DefaultKeyBurst), "MCP tool calls per key allowed in a burst", false, parseBurst("MCP_KEY", &c.MCP.Key)},
		{"mcp-user-rate", "MCP_USER_RATE", formatRate(mcp.DefaultUserRate), "MCP tool calls per second allowed per person, all their keys and apps together", false, parseRate("MCP_USER", &c.MCP.User)},
		{"mcp-user-burst", "MCP_USER_BURST", strconv.Itoa(mcp.DefaultUserBurst), "MCP tool calls per person allowed in a burst", false, parseBurst("MCP_USER", &c.MCP.User)},
		{"mcp-workspace-rate", "MCP_WORKSPACE_RATE", formatRate(mcp.DefaultWorkspaceRate), "MCP tool calls per second allowed per workspace, all its people together", false, parseRate("MCP_WORKSPACE", &c.MCP.Workspace)},
		{"mcp-workspace-burst", "MCP_WORKSPACE_BURST", strconv.Itoa(mcp.DefaultWorkspaceBurst), "MCP tool calls per workspace allowed in a burst", false, parseBurst("MCP_WORKSPACE", &c.MCP.Workspace)},
		{"outage-grace", "OUTAGE_GRACE", formatDuration(service.DefaultOutageGrace), "how long cached keys, policies and credentials serve while the database is unreachable (0: not at all)", false, p.outageGrace},
		{"trusted-proxies", "TRUSTED_PROXIES", "", "CIDRs of reverse proxies whose X-Forwarded-For/Forwarded give the client address (comma-separated)", false, p.trustedProxies},
		{"upstream-private-networks", "UPSTREAM_PRIVATE_NETWORKS", "", "CIDRs of inner networks the gateway may call out to (approval webhooks), also over plain http (comma-separated)", false, p.privateNetworks},
		{"max-keys-per-user", "MAX_KEYS_PER_USER", strconv.Itoa(service.DefaultMaxKeysPerUser), "working MCP keys one person may hold", false, parseCap("MAX_KEYS_PER_USER", &c.Caps.KeysPerUser)},
		{"max-workspaces-per-user", "MAX_WORKSPACES_PER_USER", strconv.Itoa(service.DefaultMaxWorkspacesPerUser), "shared workspaces one person may own", false, parseCap("MAX_WORKSPACES_PER_USER", &c.Caps.WorkspacesPerUser)},
		{"allowed-origins", "ALLOWED_ORIGINS", "", "browser origins allowed on /mcp besides PUBLIC_URL's (comma-separated)", false, p.allowedOrigins},
		{"audit-retention", "AUDIT_RETENTION", "", "how long audit rows are kept, e.g. 90d; empty keeps everything", false, p.auditRetention},
		{"log-level", "LOG_LEVEL", "info", "debug, info, warn or error", false, p.logLevel},
		{"encryption-key", "ENCRYPTION_KEY", "", "vault root key: 32 random bytes, base64", true, p.encryptionKey},
		{"jwt-secret", "JWT_SECRET", "", "dashboard session signing secret, at least 32 bytes", true, p.jwtSecret},
	}
}

// parser holds what the settings' parse functions share: the Config they
// fill, whether the command needs the secrets, and whether SMTP_URL was
// given (even if it did not parse), which MAIL_FROM and SIGNUP_VERIFY read.
type parser struct {
	c           *Config
	needSecrets bool
	smtp        bool
}

func (p *parser) listenAddr(v string) error {
	p.c.HTTP.ListenAddr = v
	if _, _, err := net.SplitHostPort(v); err != nil {
		return fmt.Errorf("LISTEN_ADDR %q is not host:port", v)
	}
	return nil
}

func (p *parser) publicURL(v string) error {
	p.c.HTTP.PublicURL = strings.TrimRight(v, "/")
	return checkURL("PUBLIC_URL", v)
}

func (p *parser) databaseURL(v string) error {
	p.c.DB.URL = v
	// A keyword/value string (host=... dbname=...) is not a URL.
	if _, err := url.Parse(v); v != "" && err != nil && !strings.Contains(v, "=") {
		return errors.New("DATABASE_URL is not a valid PostgreSQL URL")
	}
	return nil
}

func (p *parser) dataDir(v string) error {
	p.c.DB.DataDir = v
	if v == "" && p.c.Embedded() {
		return errors.New("DATA_DIR must be set when DATABASE_URL is not")
	}
	return nil
}

func (p *parser) maxConns(v string) error {
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < store.MinMaxConns || n > 1000 {
		return fmt.Errorf("DATABASE_MAX_CONNS must be a whole number from %d to 1000, or empty to size the pool from the machine, not %q",
			store.MinMaxConns, v)
	}
	p.c.DB.MaxConns = int32(n)
	return nil
}

// smtpURL reads SMTP_URL. No message about the mail settings repeats it: it
// holds a password.
func (p *parser) smtpURL(v string) error {
	if p.smtp = v != ""; !p.smtp {
		return nil
	}
	srv, err := mail.ParseURL(v)
	p.c.Mail.Server = srv
	return err
}

func (p *parser) mailFrom(v string) error {
	p.c.Mail.From = v
	if !p.smtp {
		return nil
	}
	if v == "" {
		return errors.New("MAIL_FROM is required with SMTP_URL, e.g. mcpgate <noreply@example.com>")
	}
	if _, err := netmail.ParseAddress(v); err != nil {
		return fmt.Errorf("MAIL_FROM %q is not an email address", v)
	}
	return nil
}

// signupVerify settles SIGNUP_VERIFY: unset, addresses are verified where
// mail can be sent.
func (p *parser) signupVerify(v string) error {
	switch v {
	case "":
		p.c.Mail.Verify = "off"
		if p.smtp {
			p.c.Mail.Verify = "required"
		}
	case "off", "required":
		p.c.Mail.Verify = v
		if v == "required" && !p.smtp {
			return errors.New("SIGNUP_VERIFY=required needs SMTP_URL: verification links are sent by email")
		}
	default:
		return fmt.Errorf("SIGNUP_VERIFY must be required or off, not %q", v)
	}
	return nil
}

func (p *parser) outageGrace(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > 24*time.Hour {
		return fmt.Errorf("OUTAGE_GRACE must be a duration from 0 to 24h such as 10m, not %q", v)
	}
	p.c.MCP.OutageGrace = cmp.Or(d, -1)
	return nil
}

func (p *parser) trustedProxies(v string) error {
	proxies, err := httpx.ParseProxies(v)
	if err != nil {
		return errors.New("TRUSTED_PROXIES: " + err.Error() + " (write CIDRs such as 10.0.0.0/8,172.16.0.0/12)")
	}
	p.c.Proxy.Trusted = proxies
	return nil
}

// privateNetworks reads UPSTREAM_PRIVATE_NETWORKS.
func (p *parser) privateNetworks(v string) error {
	nets, err := netguard.ParseNetworks(v)
	if err != nil {
		return errors.New("UPSTREAM_PRIVATE_NETWORKS: " + err.Error() + " (write CIDRs such as 10.20.0.0/16)")
	}
	p.c.Proxy.PrivateNetworks = nets
	return nil
}

// allowedOrigins reads ALLOWED_ORIGINS, one problem per value that is not
// an origin.
func (p *parser) allowedOrigins(v string) error {
	var bad []error
	for _, o := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		if u, err := url.Parse(o); err != nil || mcp.OriginOf(o) == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			bad = append(bad, fmt.Errorf("ALLOWED_ORIGINS: %q is not an origin such as https://app.example.com", o))
		}
		p.c.Proxy.AllowedOrigins = append(p.c.Proxy.AllowedOrigins, o)
	}
	return errors.Join(bad...)
}

func (p *parser) auditRetention(v string) error {
	d, err := parseRetention(v)
	if err != nil {
		return fmt.Errorf("AUDIT_RETENTION must be a number of days such as 90d (at least 1d), or empty to keep everything, not %q: %v", v, err)
	}
	p.c.Audit.Retention = d
	return nil
}

func (p *parser) logLevel(v string) error {
	if err := p.c.LogLevel.UnmarshalText([]byte(v)); err != nil {
		return fmt.Errorf("LOG_LEVEL must be debug, info, warn or error, not %q", v)
	}
	return nil
}

// encryptionKey and jwtSecret check a secret only when it is given: without
// DATABASE_URL, serve generates the missing ones (ensureGeneratedSecrets).
func (p *parser) encryptionKey(v string) error {
	p.c.Vault.EncryptionKey = mcpgate.Secret(v)
	if v != "" {
		return checkRootKey("ENCRYPTION_KEY", v)
	}
	if p.needSecrets && !p.c.Embedded() {
		return errors.New("ENCRYPTION_KEY is required with DATABASE_URL (generate one: openssl rand -base64 32)")
	}
	return nil
}

func (p *parser) jwtSecret(v string) error {
	p.c.Session.JWTSecret = mcpgate.Secret(v)
	if v != "" {
		return checkJWTSecret(v)
	}
	if p.needSecrets && !p.c.Embedded() {
		return errors.New("JWT_SECRET is required with DATABASE_URL (generate one: openssl rand -base64 32)")
	}
	return nil
}

// httpURL reads a URL that must be http or https.
func httpURL(env string, dst *string) func(string) error {
	return func(v string) error {
		*dst = v
		return checkURL(env, v)
	}
}

// oneOf reads a setting that takes one of two words.
func oneOf(env string, dst *string, a, b string) func(string) error {
	return func(v string) error {
		*dst = v
		if v != a && v != b {
			return fmt.Errorf("%s must be %s or %s, not %q", env, a, b, v)
		}
		return nil
	}
}

// parseRate reads the calls per second of the limit whose variables start
// with env (MCP_KEY: MCP_KEY_RATE) into l.
func parseRate(env string, l *Limit) func(string) error {
	return func(v string) error {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || !(r > 0) || r > 1e9 {
			return fmt.Errorf("%s_RATE must be a positive number of calls per second, not %q", env, v)
		}
		l.Rate = rate.Limit(r)
		return nil
	}
}

// parseBurst reads the burst of the limit whose variables start with env.
func parseBurst(env string, l *Limit) func(string) error {
	return func(v string) error {
		b, err := strconv.Atoi(v)
		if err != nil || b < 1 || b > 1e9 {
			return fmt.Errorf("%s_BURST must be a whole number of at least 1, not %q", env, v)
		}
		l.Burst = b
		return nil
	}
}

// parseCap reads a cap on what one person may hold.
func parseCap(env string, dst *int) func(string) error {
	return func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1e6 {
			return fmt.Errorf("%s must be a whole number of at least 1, not %q", env, v)
		}
		*dst = n
		return nil
	}
}

// formatRate writes a default rate as an operator would ("20", "0.5").
func formatRate(r rate.Limit) string { return strconv.FormatFloat(float64(r), 'g', -1, 64) }

// formatDuration writes a default duration as an operator would: "10m",
// not time.Duration's "10m0s".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// LoadConfig reads serve's flags, then the environment for every flag not
// given, then NAME_FILE for secrets, and parses the result. It reports every
// problem at once.
func LoadConfig(args []string, getenv func(string) string) (*Config, error) {
	return loadConfig("serve", args, getenv, true)
}

// loadConfig is LoadConfig for a command; needSecrets is false for commands
// that never seal, open or sign anything (migrate).
func loadConfig(command string, args []string, getenv func(string) string, needSecrets bool) (*Config, error) {
	c := &Config{}
	settings := c.settings(needSecrets)
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	values := make([]*string, len(settings))
	for i, s := range settings {
		values[i] = fs.String(s.flag, s.def, s.usage+" (env "+s.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, usage(fs))
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var problems []string
	for i, s := range settings {
		if set[s.flag] {
			continue
		}
		v, p := fromEnv(s, getenv)
		problems = append(problems, p...)
		if v != "" {
			*values[i] = v
		}
	}
	for i, s := range settings {
		problems = append(problems, problemsOf(s.parse(*values[i]))...)
	}
	if len(problems) > 0 {
		return nil, &ConfigError{Problems: problems}
	}
	return c, nil
}

// fromEnv reads a setting from the environment: NAME, or for a secret the
// file NAME_FILE names. Empty means not set.
func fromEnv(s setting, getenv func(string) string) (string, []string) {
	v := getenv(s.env)
	path := getenv(s.env + "_FILE")
	if !s.secret || path == "" {
		return v, nil
	}
	var p []string
	if v != "" {
		p = append(p, fmt.Sprintf("%s and %s_FILE are both set; set one", s.env, s.env))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		p = append(p, fmt.Sprintf("%s_FILE: cannot read %s: %v", s.env, path, errors.Unwrap(err)))
	}
	return strings.TrimSpace(string(b)), p
}

// problemsOf lists the problems in a setting's error: one, or each of those
// joined by errors.Join.
func problemsOf(err error) []string {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var p []string
		for _, e := range j.Unwrap() {
			p = append(p, problemsOf(e)...)
		}
		return p
	}
	return []string{err.Error()}
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
// whole words, and words are split only at characters no base64 key holds
// ("-", "_", spaces, punctuation): split at "+" or "/" too, about one random
// key in a few hundred thousand would start "xxX+" and be refused.
var placeholderWords = []string{"xxx", "todo"}

// inBase64 reports whether r belongs to standard base64's alphabet (padding
// included).
func inBase64(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '+' || r == '/' || r == '='
}

func isPlaceholder(v string) bool {
	l := strings.ToLower(v)
	for _, p := range placeholders {
		if strings.Contains(l, p) {
			return true
		}
	}
	words := strings.FieldsFunc(l, func(r rune) bool { return !inBase64(r) })
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

func checkRootKey(name, v string) error {
	if isPlaceholder(v) {
		return errors.New(name + " looks like a placeholder; generate one: openssl rand -base64 32")
	}
	if _, err := vault.ParseRootKey(v); err != nil {
		return errors.New(name + " must be 32 random bytes, base64-encoded (generate one: openssl rand -base64 32)")
	}
	return nil
}

func checkJWTSecret(v string) error {
	if len(v) < 32 {
		return errors.New("JWT_SECRET must be at least 32 bytes (generate one: openssl rand -base64 32)")
	}
	if isPlaceholder(v) {
		return errors.New("JWT_SECRET looks like a placeholder; generate one: openssl rand -base64 32")
	}
	return nil
}

func checkURL(name, v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s %q must be an http or https URL", name, v)
	}
	return nil
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
	p := problemsOf(checkRootKey("generated encryption_key", c.Vault.EncryptionKey.Reveal()))
	if s := c.Session.JWTSecret.Reveal(); len(s) < 32 || isPlaceholder(s) {
		p = append(p, "generated jwt_secret in DATA_DIR is shorter than 32 bytes or not random; "+
			"delete it to generate a new one (this ends every session)")
	}
	if len(p) > 0 {
		return nil, &ConfigError{Problems: p}
	}
	return generated, nil
}

// mailOptions returns the mailer's options, or nil without SMTP_URL.
func (c *Config) mailOptions() *mail.Options {
	if c.Mail.Server == nil {
		return nil
	}
	return &mail.Options{Server: c.Mail.Server, From: c.Mail.From}
}
