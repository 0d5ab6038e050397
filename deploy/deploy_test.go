package deploy

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

const root = ".."

// testEnv is a complete .env: what a self-hoster fills in.
func testEnv() map[string]string {
	return map[string]string{
		"ENCRYPTION_KEY":    "q2R0b1x7bWb8xX0nX0k0pG2wG8qQm6l3yqkqjvJqKx0=",
		"JWT_SECRET":        "c3VwZXItbG9uZy1qd3Qtc2lnbmluZy1zZWNyZXQtMTIz",
		"POSTGRES_PASSWORD": "0f3c9a7e5b1d2c4e6f8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c",
	}
}

// loadCompose loads docker-compose.yml as `docker compose` would, with env as
// the whole environment (neither the process's environment nor a .env file is
// read) and the given profiles enabled.
func loadCompose(t *testing.T, env map[string]string, profiles ...string) (*types.Project, error) {
	t.Helper()
	var list []string
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithWorkingDirectory(root), cli.WithEnv(list), cli.WithProfiles(profiles), cli.WithName("mcpgate"))
	if err != nil {
		t.Fatalf("NewProjectOptions() err = %v", err)
	}
	return opts.LoadProject(context.Background())
}

func mustLoadCompose(t *testing.T, env map[string]string, profiles ...string) *types.Project {
	t.Helper()
	p, err := loadCompose(t, env, profiles...)
	if err != nil {
		t.Fatalf("load docker-compose.yml err = %v", err)
	}
	return p
}

func envValue(t *testing.T, s types.ServiceConfig, name string) string {
	t.Helper()
	v, ok := s.Environment[name]
	if !ok || v == nil {
		t.Fatalf("service %s: environment lacks %s", s.Name, name)
	}
	return *v
}

func TestCompose_Services(t *testing.T) {
	env := testEnv()
	p := mustLoadCompose(t, env)

	if got := slices.Sorted(func(yield func(string) bool) {
		for name := range p.Services {
			if !yield(name) {
				return
			}
		}
	}); !slices.Equal(got, []string{"mcpgate", "postgres"}) {
		t.Fatalf("services without a profile = %v, want [mcpgate postgres]", got)
	}

	pg := p.Services["postgres"]
	if !strings.HasPrefix(pg.Image, "postgres:16") {
		t.Errorf("postgres image = %q, want the official postgres:16", pg.Image)
	}
	if pg.HealthCheck == nil || !strings.Contains(strings.Join(pg.HealthCheck.Test, " "), "pg_isready") {
		t.Errorf("postgres healthcheck = %+v, want pg_isready", pg.HealthCheck)
	}
	if envValue(t, pg, "POSTGRES_PASSWORD") != env["POSTGRES_PASSWORD"] {
		t.Errorf("postgres password not taken from the environment")
	}
	var dataVolume bool
	for _, v := range pg.Volumes {
		if v.Type == types.VolumeTypeVolume && v.Source == "pgdata" && v.Target == "/var/lib/postgresql/data" {
			dataVolume = true
		}
	}
	if !dataVolume {
		t.Errorf("postgres volumes = %+v, want the named volume pgdata on /var/lib/postgresql/data", pg.Volumes)
	}
	if _, ok := p.Volumes["pgdata"]; !ok {
		t.Errorf("top-level volumes = %v, want pgdata", p.Volumes)
	}

	gw := p.Services["mcpgate"]
	if gw.Build == nil || gw.Build.Target != "mcpgate" {
		t.Errorf("mcpgate build = %+v, want the Dockerfile's mcpgate target", gw.Build)
	} else if abs, _ := filepath.Abs(root); gw.Build.Context != abs {
		t.Errorf("mcpgate build context = %q, want the repository root %q", gw.Build.Context, abs)
	}
	if dep, ok := gw.DependsOn["postgres"]; !ok || dep.Condition != types.ServiceConditionHealthy {
		t.Errorf("mcpgate depends_on = %+v, want postgres service_healthy", gw.DependsOn)
	}
	if gw.Restart != types.RestartPolicyUnlessStopped {
		t.Errorf("mcpgate restart = %q, want unless-stopped", gw.Restart)
	}
	wantEnv := map[string]string{
		"ENCRYPTION_KEY": env["ENCRYPTION_KEY"],
		"JWT_SECRET":     env["JWT_SECRET"],
		"DATABASE_URL":   "postgres://mcpgate:" + env["POSTGRES_PASSWORD"] + "@postgres:5432/mcpgate?sslmode=disable",
		"PUBLIC_URL":     "http://localhost:8080",
		"E2B_API_URL":    "https://api.e2b.app",
	}
	for k, want := range wantEnv {
		if got := envValue(t, gw, k); got != want {
			t.Errorf("mcpgate %s = %q, want %q", k, got, want)
		}
	}
	var port bool
	for _, pc := range gw.Ports {
		if pc.Target == 8080 && pc.Published == "8080" {
			port = true
		}
	}
	if !port {
		t.Errorf("mcpgate ports = %+v, want 8080:8080", gw.Ports)
	}
	if gw.HealthCheck == nil || !slices.Contains(gw.HealthCheck.Test, "/usr/local/bin/healthcheck") {
		t.Errorf("mcpgate healthcheck = %+v, want the image's /healthz probe", gw.HealthCheck)
	}
	if !gw.ReadOnly {
		t.Errorf("mcpgate root filesystem is writable; want read_only")
	}
}

func TestCompose_Overrides(t *testing.T) {
	env := testEnv()
	env["PUBLIC_URL"] = "https://mcp.example.com"
	env["MCPGATE_PORT"] = "9000"
	p := mustLoadCompose(t, env)
	gw := p.Services["mcpgate"]
	if got := envValue(t, gw, "PUBLIC_URL"); got != "https://mcp.example.com" {
		t.Errorf("PUBLIC_URL = %q, want the one from .env", got)
	}
	if gw.Ports[0].Published != "9000" || gw.Ports[0].Target != 8080 {
		t.Errorf("ports = %+v, want 9000:8080", gw.Ports)
	}
}

// TestCompose_RequiredSecrets checks that compose stops with a message naming
// the variable and how to make one, for each missing secret.
func TestCompose_RequiredSecrets(t *testing.T) {
	for _, name := range []string{"ENCRYPTION_KEY", "JWT_SECRET", "POSTGRES_PASSWORD"} {
		t.Run(name, func(t *testing.T) {
			for _, value := range []string{"unset", ""} {
				env := testEnv()
				if value == "unset" {
					delete(env, name)
				} else {
					env[name] = value // ":?" also refuses an empty value
				}
				_, err := loadCompose(t, env)
				if err == nil {
					t.Fatalf("load without %s (%s) err = nil, want an error", name, value)
				}
				msg := err.Error()
				if !strings.Contains(msg, "set "+name+" in .env") || !strings.Contains(msg, "openssl rand") {
					t.Fatalf("load without %s err = %q, want it to say to set %s and how", name, msg, name)
				}
			}
		})
	}
}

func TestCompose_DemoProfile(t *testing.T) {
	env := testEnv()
	p := mustLoadCompose(t, env)
	if _, ok := p.Services["e2bsim"]; ok {
		t.Fatal("e2bsim runs without the demo profile")
	}
	env["E2B_API_URL"] = "http://e2bsim:3001"
	env["E2B_DASHBOARD_API_URL"] = "http://e2bsim:3001"
	p = mustLoadCompose(t, env, "demo")
	sim, ok := p.Services["e2bsim"]
	if !ok {
		t.Fatal("the demo profile has no e2bsim service")
	}
	if sim.Build == nil || sim.Build.Target != "e2bsim" {
		t.Errorf("e2bsim build = %+v, want the Dockerfile's e2bsim target", sim.Build)
	}
	if !slices.Contains(sim.Command, "0.0.0.0:3001") {
		t.Errorf("e2bsim command = %v, want it to listen on 0.0.0.0:3001", sim.Command)
	}
	for _, pc := range sim.Ports {
		if pc.HostIP != "127.0.0.1" {
			t.Errorf("e2bsim port %+v is published beyond loopback", pc)
		}
	}
	gw := p.Services["mcpgate"]
	for _, k := range []string{"E2B_API_URL", "E2B_DASHBOARD_API_URL"} {
		if got := envValue(t, gw, k); got != "http://e2bsim:3001" {
			t.Errorf("demo: mcpgate %s = %q, want http://e2bsim:3001", k, got)
		}
	}
}

// TestEnvExample checks that .env.example names every variable the compose
// file requires, and holds no value for the secrets.
func TestEnvExample(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	compose, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	required := regexp.MustCompile(`\$\{([A-Z_]+):\?`).FindAllStringSubmatch(string(compose), -1)
	if len(required) == 0 {
		t.Fatal("docker-compose.yml requires no variable")
	}
	for _, m := range required {
		v, ok := vars[m[1]]
		if !ok {
			t.Errorf(".env.example lacks %s, which docker-compose.yml requires", m[1])
		} else if v != "" {
			t.Errorf(".env.example gives %s a value; secrets must be generated by each self-hoster", m[1])
		}
	}
	ignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".env", "data", ".git"} {
		if !slices.Contains(strings.Fields(string(ignore)), want) {
			t.Errorf(".dockerignore lacks %s: it would enter the build context", want)
		}
	}
}

// instruction is one Dockerfile instruction with its continuation lines
// joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
}

type stage struct {
	name, base string
	ins        []instruction
}

// parseDockerfile splits a Dockerfile into stages. It understands what this
// Dockerfile uses: comments, parser directives, backslash continuations and
// FROM ... AS name.
func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []stage
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			st := stage{base: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			return
		}
		if len(stages) == 0 {
			return // ARG before the first FROM
		}
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue // comments (and directives) may sit even inside continuations
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	flush()
	return stages
}

// goBuild is one `go build` command line, normalised for comparison.
type goBuild struct {
	env     []string // VAR=value set on the command
	flags   []string // flags but -o, with the build-time version as VERSION
	pkg     string
	ldflags string
}

var versionRef = regexp.MustCompile(`\$[({]VERSION[)}]`)

// parseGoBuild finds `go build ... <pkg>` in a shell command (the first one
// building pkg) and returns it normalised.
func parseGoBuild(t *testing.T, shell, pkg string) (goBuild, bool) {
	t.Helper()
	for part := range strings.SplitSeq(shell, "&&") {
		words := shellWords(strings.TrimSpace(part))
		i := slices.IndexFunc(words, func(w string) bool { return w == "build" })
		if i < 1 || !strings.HasSuffix(words[i-1], "go") && words[i-1] != "$(GO)" || words[len(words)-1] != pkg {
			continue
		}
		var b goBuild
		b.pkg = pkg
		for _, w := range words[:i-1] {
			if strings.Contains(w, "=") {
				b.env = append(b.env, w)
			}
		}
		args := words[i+1 : len(words)-1]
		for j := 0; j < len(args); j++ {
			switch args[j] {
			case "-o":
				j++
			case "-ldflags":
				j++
				b.ldflags = versionRef.ReplaceAllString(args[j], "VERSION")
				b.flags = append(b.flags, "-ldflags")
			default:
				b.flags = append(b.flags, args[j])
			}
		}
		return b, true
	}
	return goBuild{}, false
}

// shellWords splits on blanks, keeping double-quoted strings whole.
func shellWords(s string) []string {
	var out []string
	var w strings.Builder
	inQuote, have := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			have = true
		case (r == ' ' || r == '\t') && !inQuote:
			if have {
				out = append(out, w.String())
				w.Reset()
				have = false
			}
		default:
			w.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, w.String())
	}
	return out
}

// makeBuild returns the Makefile's build target's go build, with the
// Makefile's variables (LDFLAGS) expanded.
func makeBuild(t *testing.T) goBuild {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	var recipe []string
	inBuild := false
	for line := range strings.SplitSeq(string(b), "\n") {
		if m := regexp.MustCompile(`^([A-Z_]+)\s*:?=\s*(.*)$`).FindStringSubmatch(line); m != nil {
			vars[m[1]] = m[2]
			continue
		}
		if strings.HasPrefix(line, "build:") {
			inBuild = true
			continue
		}
		if inBuild {
			if !strings.HasPrefix(line, "\t") {
				inBuild = false
				continue
			}
			recipe = append(recipe, strings.TrimSpace(line))
		}
	}
	cmd := strings.Join(recipe, " && ")
	for k, v := range vars {
		if k != "VERSION" && k != "GO" {
			cmd = strings.ReplaceAll(cmd, "$("+k+")", v)
		}
	}
	gb, ok := parseGoBuild(t, cmd, "./cmd/mcpgate")
	if !ok {
		t.Fatalf("the Makefile's build target does not go build ./cmd/mcpgate: %q", cmd)
	}
	return gb
}

func TestDockerfile_BuildsWhatMakeBuilds(t *testing.T) {
	want := makeBuild(t)
	stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a multi-stage build", len(stages))
	}
	var got goBuild
	var buildStage *stage
	for i := range stages {
		for _, in := range stages[i].ins {
			if in.cmd != "RUN" {
				continue
			}
			if gb, ok := parseGoBuild(t, in.args, "./cmd/mcpgate"); ok {
				got, buildStage = gb, &stages[i]
			}
		}
	}
	if buildStage == nil {
		t.Fatal("no Dockerfile stage runs go build ./cmd/mcpgate")
	}
	if !strings.HasPrefix(buildStage.base, "golang:") {
		t.Errorf("build stage base = %q, want a golang image", buildStage.base)
	}
	if !slices.Equal(got.flags, want.flags) {
		t.Errorf("Dockerfile go build flags = %v, Makefile's = %v", got.flags, want.flags)
	}
	if got.ldflags != want.ldflags {
		t.Errorf("Dockerfile -ldflags = %q, Makefile's = %q", got.ldflags, want.ldflags)
	}
	if !slices.Contains(got.env, "CGO_ENABLED=0") || !slices.Contains(want.env, "CGO_ENABLED=0") {
		t.Errorf("CGO_ENABLED=0: Dockerfile env %v, Makefile env %v; both must build a static binary", got.env, want.env)
	}
	var cacheMount bool
	for _, in := range buildStage.ins {
		if in.cmd == "RUN" && strings.Contains(in.args, "--mount=type=cache,target=/go/pkg/mod") {
			cacheMount = true
		}
	}
	if !cacheMount {
		t.Errorf("build stage has no module cache mount")
	}
}

func TestDockerfile_FinalStage(t *testing.T) {
	stages := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	final := stages[len(stages)-1]
	if final.name != "mcpgate" {
		t.Errorf("final (default) stage = %q, want mcpgate", final.name)
	}
	if strings.HasPrefix(final.base, "golang:") {
		t.Errorf("final stage is based on %q: the toolchain would ship", final.base)
	}
	last := func(cmd string) (instruction, bool) {
		for i := len(final.ins) - 1; i >= 0; i-- {
			if final.ins[i].cmd == cmd {
				return final.ins[i], true
			}
		}
		return instruction{}, false
	}
	user, ok := last("USER")
	if !ok {
		t.Fatal("final stage sets no USER: it would run as root")
	}
	if u, _, _ := strings.Cut(user.args, ":"); u == "root" || u == "0" || u == "" {
		t.Errorf("final stage USER = %q, want a non-root user", user.args)
	}
	hc, ok := last("HEALTHCHECK")
	if !ok || !strings.Contains(hc.args, "CMD") || strings.Contains(hc.args, "NONE") {
		t.Errorf("final stage HEALTHCHECK = %q, want a probe", hc.args)
	}
	if exp, ok := last("EXPOSE"); !ok || exp.args != "8080" {
		t.Errorf("final stage EXPOSE = %q, want 8080", exp.args)
	}
	var copiesBinary bool
	for _, in := range final.ins {
		if in.cmd == "COPY" && strings.Contains(in.args, "--from=build") && strings.Contains(in.args, "/out/mcpgate ") {
			copiesBinary = true
		}
	}
	if !copiesBinary {
		t.Error("final stage does not copy the built mcpgate binary")
	}
	// No secrets baked in: none of them may be set in any stage.
	for _, st := range stages {
		for _, in := range st.ins {
			if in.cmd != "ENV" && in.cmd != "ARG" {
				continue
			}
			for _, secret := range []string{"ENCRYPTION_KEY", "JWT_SECRET", "DATABASE_URL", "POSTGRES_PASSWORD"} {
				if strings.Contains(in.args, secret) {
					t.Errorf("stage %s sets %s in %s %s", st.name, secret, in.cmd, in.args)
				}
			}
		}
	}
	// The demo image exists as its own target.
	if !slices.ContainsFunc(stages, func(s stage) bool { return s.name == "e2bsim" }) {
		t.Error("no e2bsim target for the compose demo profile")
	}
}
