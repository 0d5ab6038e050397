package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	json         bool
	duration     time.Duration
	warmup       time.Duration
	concurrency  []int
	rate         float64
	openClients  int
	sandboxes    int
	inprocess    bool
	cpuprofile   string
	memprofile   string
	blockprofile string
	trace        string
	e2bIdleConns int
	gogc         string
	gatewayBin   string
	e2bsimBin    string
	// The comparison with bare servers doing the same E2B call (compare.go).
	compare       bool
	compareRounds int
	compareDur    time.Duration
	compareConc   int
	openDur       time.Duration
	// sdkClients runs the older phases driven by go-sdk MCP clients.
	sdkClients bool
	logLevel   string
	// auditWriterRows is the size of the audit writer measurement (0: none);
	// auditScale, when set, runs only the audit measurements, at these sizes.
	auditWriterRows int
	auditWriterRate float64
	auditScale      []int
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(out)
	var conc, scale string
	fs.BoolVar(&c.json, "json", false, "print machine-readable JSON instead of the table")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "length of each measured phase")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "unmeasured warm-up before each closed-loop phase")
	fs.StringVar(&conc, "concurrency", "1,16,64,256", "comma-separated numbers of concurrent MCP clients")
	fs.Float64Var(&c.rate, "rate", 500, "offered calls/s of the open-loop phase (0 skips it)")
	fs.IntVar(&c.openClients, "open-clients", 64, "MCP sessions serving the open-loop phase")
	fs.IntVar(&c.sandboxes, "sandboxes", 5, "sandboxes created in the simulator")
	fs.BoolVar(&c.inprocess, "inprocess", false, "run the gateway inside this process (for --cpuprofile/--memprofile)")
	fs.StringVar(&c.cpuprofile, "cpuprofile", "", "with --inprocess: write a CPU profile of each phase through the gateway to this file name + .C<n> or .open")
	fs.StringVar(&c.blockprofile, "blockprofile", "", "with --inprocess: write block and mutex profiles to this file name + .block/.mutex")
	fs.StringVar(&c.trace, "trace", "", "with --inprocess: write an execution trace of each phase through the gateway to this file name + .C<n> or .open")
	fs.IntVar(&c.e2bIdleConns, "e2b-idle-conns", 0, "with --inprocess: give the E2B client a transport keeping this many idle connections (0: the connector's default, as serve does)")
	fs.StringVar(&c.memprofile, "memprofile", "", "with --inprocess: write an allocation profile to this file at the end")
	fs.StringVar(&c.gogc, "gogc", "", "GOGC for the gateway (default: whatever the gateway sets)")
	fs.StringVar(&c.gatewayBin, "gateway-bin", "", "mcpgate binary to run (default: build ./cmd/mcpgate)")
	fs.StringVar(&c.e2bsimBin, "e2bsim-bin", "", "e2bsim binary to run (default: build ./cmd/e2bsim)")
	fs.BoolVar(&c.compare, "compare", true, "compare the gateway with a bare go-sdk server, a one-hop handler and e2bsim (raw HTTP load)")
	fs.IntVar(&c.compareRounds, "compare-rounds", 5, "interleaved rounds of the comparison")
	fs.DurationVar(&c.compareDur, "compare-duration", 3*time.Second, "length of each target's turn in a round")
	fs.IntVar(&c.compareConc, "compare-concurrency", 64, "connections of the comparison")
	fs.DurationVar(&c.openDur, "open-duration", 60*time.Second, "length of the comparison's open-loop phase at --rate")
	fs.StringVar(&c.logLevel, "gateway-log-level", "info", "LOG_LEVEL of the gateway subprocess (info writes an access log line per call)")
	fs.BoolVar(&c.sdkClients, "sdk-clients", false, "also run the phases driven by go-sdk MCP clients (--concurrency, --rate)")
	fs.IntVar(&c.auditWriterRows, "audit-writer-rows", 200000, "audit events written through the audit writer for its rows/s (0 skips)")
	fs.Float64Var(&c.auditWriterRate, "audit-writer-rate", 2400, "events/s offered to the audit writer for 5 s, to watch its queue (0 skips)")
	fs.StringVar(&scale, "audit-scale", "", "only time the audit log's views on generated logs of these sizes, e.g. 1M,10M,100M (needs disk: about 0.4 GB per million rows)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if scale != "" {
		var err error
		if c.auditScale, err = parseCounts(scale); err != nil {
			return c, fmt.Errorf("--audit-scale: %w", err)
		}
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	for f := range strings.SplitSeq(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 4096 {
			return c, fmt.Errorf("--concurrency: %q is not a number from 1 to 4096", f)
		}
		c.concurrency = append(c.concurrency, n)
	}
	switch {
	case c.duration <= 0 || c.duration > time.Hour:
		return c, errors.New("--duration must be between 0 and 1h")
	case c.rate < 0 || c.rate > 100000:
		return c, errors.New("--rate must be between 0 and 100000")
	case c.openClients < 1 || c.openClients > 4096:
		return c, errors.New("--open-clients must be between 1 and 4096")
	case c.auditWriterRows < 0 || c.auditWriterRows > 100_000_000:
		return c, errors.New("--audit-writer-rows must be between 0 and 100000000")
	case c.sandboxes < 1 || c.sandboxes > 100:
		return c, errors.New("--sandboxes must be between 1 and 100")
	case (c.cpuprofile != "" || c.memprofile != "" || c.blockprofile != "" || c.trace != "") && !c.inprocess:
		return c, errors.New("--cpuprofile, --memprofile, --blockprofile and --trace need --inprocess (the gateway must run in this process)")
	}
	return c, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// phase is one row of the report.
type phase struct {
	Kind        string  `json:"kind"` // closed or open
	Concurrency int     `json:"concurrency"`
	OfferedRate float64 `json:"offered_rate,omitempty"`
	Gateway     stats   `json:"gateway"`
	Direct      stats   `json:"direct"`
	AddedP50    float64 `json:"added_p50_ms"`
	AddedP99    float64 `json:"added_p99_ms"`
	// GatewayCPUPer1k is the gateway process's CPU seconds per 1,000 calls
	// (with --inprocess, the whole benchmark process's).
	GatewayCPUPer1k float64 `json:"gateway_cpu_s_per_1k_calls"`
	// SimCPUPer1k and ClientCPUPer1k show where the rest of the machine went.
	SimCPUPer1k    float64 `json:"e2bsim_cpu_s_per_1k_calls"`
	ClientCPUPer1k float64 `json:"bench_cpu_s_per_1k_calls"`
	GatewayRSSMB   struct {
		Start float64 `json:"start"`
		End   float64 `json:"end"`
		Peak  float64 `json:"peak"`
	} `json:"gateway_rss_mb"`
}

type report struct {
	Machine struct {
		CPUs       int    `json:"cpus"`
		GOOS       string `json:"goos"`
		GoVersion  string `json:"go_version"`
		InProcess  bool   `json:"inprocess"`
		GatewayEnv string `json:"gateway_gogc,omitempty"`
		// LoadBefore and LoadAfter are the 1-minute load averages: other
		// work on the machine skews every figure.
		LoadBefore float64 `json:"loadavg_before"`
		LoadAfter  float64 `json:"loadavg_after"`
	} `json:"machine"`
	DurationSec float64 `json:"duration_sec"`
	Phases      []phase `json:"phases"`
	// Compare is the comparison with the reference servers.
	Compare *comparison `json:"compare,omitempty"`
	// HandlerTimes is the gateway's own account (/metrics) of every call
	// of the run, when it serves /metrics.
	HandlerTimes *gatewayTimes     `json:"handler_times,omitempty"`
	AuditWriter  *auditWriterStats `json:"audit_writer,omitempty"`
	AuditScale   []auditScale      `json:"audit_scale,omitempty"`
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/mcpgate/mcpgate\n") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("run the benchmark from inside the mcpgate repository")
		}
	}
}

func run(ctx context.Context, c config, out io.Writer) error {
	repo, err := repoRoot()
	if err != nil {
		return err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...) }
	tmp, err := os.MkdirTemp("", "mcpgate-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if c.auditScale != nil {
		return runAuditOnly(ctx, c, repo, out, logf)
	}

	// Binaries.
	if c.e2bsimBin == "" {
		logf("building e2bsim")
		if c.e2bsimBin, err = buildBinary(ctx, repo, tmp, "./cmd/e2bsim", "e2bsim"); err != nil {
			return err
		}
	}
	if c.gatewayBin == "" && !c.inprocess {
		logf("building mcpgate")
		if c.gatewayBin, err = buildBinary(ctx, repo, tmp, "./cmd/mcpgate", "mcpgate"); err != nil {
			return err
		}
	}

	// Database.
	admin, err := adminURL(ctx, repo)
	if err != nil {
		return err
	}
	dsn, dropDB, err := freshDatabase(ctx, admin)
	if err != nil {
		return err
	}
	defer dropDB()

	// Simulator.
	e2bKey := "e2b_" + randomHex(20)
	simAddr, err := freePort()
	if err != nil {
		return err
	}
	sim, err := startProc("e2bsim", c.e2bsimBin, []string{"--listen", simAddr, "--team-key", e2bKey, "--max-running", "1000"},
		os.Environ())
	if err != nil {
		return err
	}
	defer sim.stop()
	simURL := "http://" + simAddr
	if err := sim.waitHTTP(simURL+"/v2/sandboxes", true, 15*time.Second); err != nil {
		return err
	}

	// Gateway.
	encKey := make([]byte, 32)
	_, _ = rand.Read(encKey)
	secrets := struct{ enc, jwt string }{base64.StdEncoding.EncodeToString(encKey), randomHex(32)}
	var gwURL string
	gwPID := 0
	var inproc *inprocGateway
	if c.inprocess {
		if c.gogc != "" {
			if n, err := strconv.Atoi(c.gogc); err == nil {
				debug.SetGCPercent(n)
			}
		}
		o := inprocOptions{dsn: dsn, e2bURL: simURL, jwtSecret: secrets.jwt, encryptionKey: secrets.enc}
		if c.e2bIdleConns > 0 {
			o.e2bHTTP = &http.Client{Timeout: 35 * time.Second, Transport: newTransport(c.e2bIdleConns)}
		}
		inproc, err = startInProcess(ctx, o)
		if err != nil {
			return err
		}
		defer inproc.close()
		gwURL, gwPID = inproc.url, os.Getpid()
	} else {
		addr, err := freePort()
		if err != nil {
			return err
		}
		env := append(os.Environ(),
			"DATABASE_URL="+dsn, "ENCRYPTION_KEY="+secrets.enc, "JWT_SECRET="+secrets.jwt,
			"LISTEN_ADDR="+addr, "PUBLIC_URL=http://"+addr, "E2B_API_URL="+simURL, "E2B_DASHBOARD_API_URL="+simURL,
			// info, as deployed: the access log line of every call is part
			// of the gateway's cost.
			"LOG_LEVEL="+c.logLevel, "LOG_FORMAT=json",
			// The benchmark measures the gateway, not its per-key limit.
			"MCP_KEY_RATE=1000000", "MCP_KEY_BURST=1000000")
		if c.gogc != "" {
			env = append(env, "GOGC="+c.gogc)
		}
		gw, err := startProc("mcpgate", c.gatewayBin, []string{"serve"}, env)
		if err != nil {
			return err
		}
		defer gw.stop()
		gwURL, gwPID = "http://"+addr, gw.pid()
		if err := gw.waitHTTP(gwURL+"/readyz", false, 60*time.Second); err != nil {
			return err
		}
	}

	maxC := c.openClients
	for _, n := range c.concurrency {
		maxC = max(maxC, n)
	}
	logf("setting up: user, E2B key, %d MCP keys, %d sandboxes", maxC, c.sandboxes)
	fx, err := setUp(ctx, gwURL, simURL, e2bKey, maxC, c.sandboxes)
	if err != nil {
		return err
	}

	var rep report
	rep.Machine.CPUs, rep.Machine.GOOS, rep.Machine.GoVersion = runtime.NumCPU(), runtime.GOOS, runtime.Version()
	rep.Machine.InProcess, rep.Machine.GatewayEnv = c.inprocess, c.gogc
	rep.DurationSec = c.duration.Seconds()
	rep.Machine.LoadBefore = loadAvg()

	if c.blockprofile != "" {
		runtime.SetBlockProfileRate(int(10 * time.Microsecond))
		runtime.SetMutexProfileFraction(10)
	}
	// profile runs fn under a CPU profile written to --cpuprofile with the
	// phase's name appended: only the phases through the gateway are
	// profiled, so the profile is the gateway's (plus its MCP clients).
	profile := func(name string, fn func() stats) func() stats {
		if c.trace != "" {
			fn = recording("trace", c.trace+"."+name, trace.Start, trace.Stop, fn, logf)
		}
		if c.cpuprofile != "" {
			fn = recording("cpuprofile", c.cpuprofile+"."+name, pprof.StartCPUProfile, pprof.StopCPUProfile, fn, logf)
		}
		return fn
	}

	gwTransport := newTransport(maxC)
	simTransport := newTransport(maxC)
	dial := func(n int) ([]caller, error) {
		cs := make([]caller, 0, n)
		for i := range n {
			m, err := dialMCP(ctx, gwURL+"/mcp", fx.mcpKeys[i], gwTransport, fx.sandboxes, i)
			if err != nil {
				closeAll(cs)
				return nil, err
			}
			cs = append(cs, m)
		}
		return cs, nil
	}
	direct := func(n int) []caller {
		cs := make([]caller, n)
		hc := &http.Client{Transport: simTransport, Timeout: 60 * time.Second}
		for i := range cs {
			cs[i] = &directCaller{base: simURL, key: e2bKey, http: hc, sandboxes: fx.sandboxes, offset: i}
		}
		return cs
	}
	measure := func(p *phase, fn func() stats) {
		var samples []int64
		stopSampling := sampleEvery(250*time.Millisecond, func() {
			if u := readUsage(gwPID); u.valid {
				samples = append(samples, u.rss)
			}
		})
		g0, s0, b0 := readUsage(gwPID), readUsage(sim.pid()), readUsage(os.Getpid())
		p.Gateway = fn()
		g1, s1, b1 := readUsage(gwPID), readUsage(sim.pid()), readUsage(os.Getpid())
		stopSampling()
		if n := float64(p.Gateway.Calls+p.Gateway.Errors) / 1000; n > 0 {
			p.GatewayCPUPer1k = (g1.cpu - g0.cpu).Seconds() / n
			p.SimCPUPer1k = (s1.cpu - s0.cpu).Seconds() / n
			p.ClientCPUPer1k = (b1.cpu - b0.cpu).Seconds() / n
		}
		const mb = 1 << 20
		if len(samples) > 0 {
			p.GatewayRSSMB.Start = float64(samples[0]) / mb
			p.GatewayRSSMB.End = float64(samples[len(samples)-1]) / mb
		}
		p.GatewayRSSMB.Peak = float64(g1.hwm) / mb
	}

	if c.compare {
		cmp, err := compareTargets(ctx, c, repo, tmp, gwURL, gwPID, simURL, sim.pid(), e2bKey, fx, logf)
		if err != nil {
			return err
		}
		rep.Compare = cmp
	}
	for _, n := range c.concurrency {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !c.sdkClients {
			break
		}
		p := phase{Kind: "closed", Concurrency: n}
		callers, err := dial(n)
		if err != nil {
			return err
		}
		if c.warmup > 0 {
			closedLoop(ctx, callers, c.warmup)
		}
		logf("closed loop, C=%d: %s through the gateway", n, c.duration)
		measure(&p, profile(fmt.Sprintf("C%d", n), func() stats { return closedLoop(ctx, callers, c.duration) }))
		closeAll(callers)
		logf("closed loop, C=%d: %s direct to e2bsim", n, c.duration)
		dc := direct(n)
		if c.warmup > 0 {
			closedLoop(ctx, dc, c.warmup)
		}
		p.Direct = closedLoop(ctx, dc, c.duration)
		p.AddedP50, p.AddedP99 = p.Gateway.P50-p.Direct.P50, p.Gateway.P99-p.Direct.P99
		rep.Phases = append(rep.Phases, p)
	}
	if c.sdkClients && c.rate > 0 && ctx.Err() == nil {
		p := phase{Kind: "open", Concurrency: c.openClients, OfferedRate: c.rate}
		callers, err := dial(c.openClients)
		if err != nil {
			return err
		}
		if c.warmup > 0 {
			openLoop(ctx, callers, c.rate, c.warmup)
		}
		logf("open loop, %.0f calls/s: %s through the gateway", c.rate, c.duration)
		measure(&p, profile("open", func() stats { return openLoop(ctx, callers, c.rate, c.duration) }))
		closeAll(callers)
		logf("open loop, %.0f calls/s: %s direct to e2bsim", c.rate, c.duration)
		dc := direct(c.openClients)
		if c.warmup > 0 {
			openLoop(ctx, dc, c.rate, c.warmup)
		}
		p.Direct = openLoop(ctx, dc, c.rate, c.duration)
		p.AddedP50, p.AddedP99 = p.Gateway.P50-p.Direct.P50, p.Gateway.P99-p.Direct.P99
		rep.Phases = append(rep.Phases, p)
	}
	if t, ok := scrapeTimes(ctx, gwURL); ok {
		rep.HandlerTimes = &t
	}
	if c.auditWriterRows > 0 && ctx.Err() == nil {
		logf("audit writer: %d events", c.auditWriterRows)
		st, err := measureAuditWriter(ctx, dsn, c.auditWriterRows, c.auditWriterRate)
		if err != nil {
			return fmt.Errorf("audit writer: %w", err)
		}
		rep.AuditWriter = &st
	}
	rep.Machine.LoadAfter = loadAvg()
	if c.blockprofile != "" {
		for _, name := range []string{"block", "mutex"} {
			f, err := os.Create(c.blockprofile + "." + name)
			if err != nil {
				return err
			}
			_ = pprof.Lookup(name).WriteTo(f, 0)
			f.Close()
		}
	}
	if c.memprofile != "" {
		f, err := os.Create(c.memprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return err
		}
	}
	if c.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printTable(out, rep)
	return nil
}

// runAuditOnly is --audit-scale: the audit writer and the audit views at each
// size, without the gateway.
func runAuditOnly(ctx context.Context, c config, repo string, out io.Writer, logf func(string, ...any)) error {
	admin, err := adminURL(ctx, repo)
	if err != nil {
		return err
	}
	var rep report
	rep.Machine.CPUs, rep.Machine.GOOS, rep.Machine.GoVersion = runtime.NumCPU(), runtime.GOOS, runtime.Version()
	rep.Machine.LoadBefore = loadAvg()
	if c.auditWriterRows > 0 {
		dsn, drop, err := freshDatabase(ctx, admin)
		if err != nil {
			return err
		}
		logf("audit writer: %d events", c.auditWriterRows)
		st, err := measureAuditWriter(ctx, dsn, c.auditWriterRows, c.auditWriterRate)
		drop()
		if err != nil {
			return fmt.Errorf("audit writer: %w", err)
		}
		rep.AuditWriter = &st
	}
	for _, n := range c.auditScale {
		s, err := measureAuditScale(ctx, admin, n, logf)
		if err != nil {
			return fmt.Errorf("audit scale %d: %w", n, err)
		}
		rep.AuditScale = append(rep.AuditScale, s)
	}
	rep.Machine.LoadAfter = loadAvg()
	if c.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(out, "mcpgate bench, audit log: %d CPUs, %s; load average before %.2f, after %.2f\n",
		rep.Machine.CPUs, rep.Machine.GoVersion, rep.Machine.LoadBefore, rep.Machine.LoadAfter)
	printAuditWriter(out, rep.AuditWriter)
	printAuditScale(out, rep.AuditScale)
	return nil
}

func closeAll(cs []caller) {
	for _, c := range cs {
		c.close()
	}
}

func printTable(w io.Writer, rep report) {
	mode := "gateway as a subprocess"
	if rep.Machine.InProcess {
		mode = "gateway in process (CPU figures include the load generator)"
	}
	fmt.Fprintf(w, "mcpgate bench: %d CPUs, %s, %s, %.0f s per phase; latency in ms; calls alternate e2b_list_sandboxes and e2b_get_sandbox\n",
		rep.Machine.CPUs, rep.Machine.GoVersion, mode, rep.DurationSec)
	fmt.Fprintf(w, "load average before %.2f, after %.2f", rep.Machine.LoadBefore, rep.Machine.LoadAfter)
	if rep.Machine.LoadBefore > float64(rep.Machine.CPUs)/2 {
		fmt.Fprint(w, " (the machine was busy with other work: figures are pessimistic)")
	}
	fmt.Fprint(w, "\n\n")
	if rep.Compare != nil {
		printComparison(w, rep.Compare)
	}
	// The go-sdk-client phases (--sdk-clients) have tables of their own.
	phases := len(rep.Phases) > 0
	if phases {
		fmt.Fprintf(w, "%-12s %8s | %7s %7s %7s | %7s %7s %7s | %9s %9s | %6s | %9s %9s | %s\n",
			"phase", "calls/s", "gw p50", "gw p95", "gw p99", "dir p50", "dir p95", "dir p99", "added p50", "added p99",
			"errors", "cpu s/1k", "peak RSS", "RSS start→end")
	}
	for _, p := range rep.Phases {
		name := fmt.Sprintf("C=%d", p.Concurrency)
		if p.Kind == "open" {
			name = fmt.Sprintf("open %.0f/s", p.OfferedRate)
		}
		fmt.Fprintf(w, "%-12s %8.0f | %7.2f %7.2f %7.2f | %7.2f %7.2f %7.2f | %9.2f %9.2f | %6d | %9.3f %7.1fMB | %.1f→%.1f MB\n",
			name, p.Gateway.CallsPerSec, p.Gateway.P50, p.Gateway.P95, p.Gateway.P99, p.Direct.P50, p.Direct.P95, p.Direct.P99,
			p.AddedP50, p.AddedP99, p.Gateway.Errors+p.Direct.Errors, p.GatewayCPUPer1k, p.GatewayRSSMB.Peak,
			p.GatewayRSSMB.Start, p.GatewayRSSMB.End)
	}
	if phases {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "%-12s %12s %12s %12s\n", "CPU s/1k", "gateway", "e2bsim", "bench")
	}
	for _, p := range rep.Phases {
		name := fmt.Sprintf("C=%d", p.Concurrency)
		if p.Kind == "open" {
			name = fmt.Sprintf("open %.0f/s", p.OfferedRate)
		}
		fmt.Fprintf(w, "%-12s %12.3f %12.3f %12.3f\n", name, p.GatewayCPUPer1k, p.SimCPUPer1k, p.ClientCPUPer1k)
	}
	if t := rep.HandlerTimes; t != nil {
		fmt.Fprintf(w, "\ngateway /metrics over all %.0f calls: %.3f ms mean in the tool handler outside the E2B call, %.3f ms mean waiting for E2B\n",
			t.Calls, t.GatewayMeanMS, t.UpstreamMeanMS)
		fmt.Fprintf(w, "database pool: %.0f connections, %.0f acquires, %.0f found the pool empty, %.3f ms mean wait for a connection\n",
			t.DBMaxConns, t.DBAcquires, t.DBEmptyAcquires, t.DBAcquireWaitMeanMS)
	}
	printAuditWriter(w, rep.AuditWriter)
	for _, p := range rep.Phases {
		for _, s := range []struct {
			who string
			st  stats
		}{{"gateway", p.Gateway}, {"direct", p.Direct}} {
			if s.st.ErrorSample != "" {
				fmt.Fprintf(w, "C=%d %s: %d errors, e.g. %s\n", p.Concurrency, s.who, s.st.Errors, s.st.ErrorSample)
			}
		}
	}
}

// loadAvg returns the 1-minute load average (0 if unknown).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// recording wraps fn so that it runs while start and stop record a profile
// or trace into the file at path. When the file or the recording cannot be
// started, fn runs all the same and the problem is logged: a benchmark
// should not be lost to a profiling flag.
func recording(what, path string, start func(io.Writer) error, stop func(), fn func() stats, logf func(string, ...any)) func() stats {
	return func() stats {
		f, err := os.Create(path)
		if err != nil {
			logf("%s: %v", what, err)
			return fn()
		}
		defer f.Close()
		if err := start(f); err != nil {
			logf("%s: %v", what, err)
			return fn()
		}
		defer stop()
		return fn()
	}
}
