package main

// The comparison that tells what the gateway costs: the gateway against a
// bare go-sdk server (bench/sdkserver), a plain one-hop handler
// (bench/onehop) and e2bsim itself, all making the same E2B GET, driven by
// the same raw HTTP load generator (no MCP client library, whose own cost
// would hide the servers'), in interleaved rounds so that what else the
// machine runs weighs on every target alike. Figures on a shared machine are noise; the ratios within
// one run are the result.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

// rawCaller sends one prepared HTTP request per call and checks the answer.
type rawCaller struct {
	http   *http.Client
	method string
	url    string
	header http.Header
	bodies [][]byte // one per sandbox, used in turn (POST)
	urls   []string // or one URL per sandbox (GET)
	offset int
	// ok reports whether a 200 answer is a success.
	ok func(body []byte) bool
}

func (c *rawCaller) call(ctx context.Context, i int) error {
	var body io.Reader
	if c.bodies != nil {
		body = bytes.NewReader(c.bodies[(i+c.offset)%len(c.bodies)])
	}
	u := c.url
	if len(c.urls) > 0 {
		u = c.urls[(i+c.offset)%len(c.urls)]
	}
	req, err := http.NewRequestWithContext(ctx, c.method, u, body)
	if err != nil {
		return err
	}
	req.Header = c.header
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !c.ok(b) {
		return fmt.Errorf("answered %s: %s", resp.Status, shorten(string(b)))
	}
	return nil
}

func (c *rawCaller) close() {}

// mcpOK is a tools/call answer with a result that is not a tool error.
func mcpOK(b []byte) bool {
	return bytes.Contains(b, []byte(`"structuredContent"`)) && !bytes.Contains(b, []byte(`"isError":true`))
}

// target is one server of the comparison.
type target struct {
	name    string
	pid     int
	callers func(n int) []caller
}

// compareResult is one target's median over the rounds.
type compareResult struct {
	Name        string    `json:"name"`
	CallsPerSec float64   `json:"calls_per_sec"`
	Rounds      []float64 `json:"rounds_calls_per_sec"`
	CPUms       float64   `json:"server_cpu_ms_per_call"`
	P50         float64   `json:"p50_ms"`
	P99         float64   `json:"p99_ms"`
	Errors      int       `json:"errors"`
	ErrorSample string    `json:"error_sample,omitempty"`
}

type comparison struct {
	Concurrency int             `json:"concurrency"`
	Rounds      int             `json:"rounds"`
	RoundSec    float64         `json:"round_sec"`
	Targets     []compareResult `json:"targets"`
	// Open is the gateway and e2bsim at a fixed offered rate.
	Open *openCompare `json:"open,omitempty"`
}

type openCompare struct {
	Rate     float64 `json:"offered_rate"`
	Seconds  float64 `json:"seconds"`
	Gateway  stats   `json:"gateway"`
	Direct   stats   `json:"direct"`
	AddedP50 float64 `json:"added_p50_ms"`
	AddedP99 float64 `json:"added_p99_ms"`
	// RSS of the gateway at the start and end of the open loop, sampled
	// each second: flat memory means no growth over the run.
	RSSStartMB, RSSEndMB, RSSPeakMB float64
	RSSSamplesMB                    []float64 `json:"rss_samples_mb"`
}

// toolsCallBodies are tools/call e2b_get_sandbox requests, one per sandbox.
func toolsCallBodies(sandboxes []string) [][]byte {
	var out [][]byte
	for i, id := range sandboxes {
		out = append(out, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"e2b_get_sandbox","arguments":{"sandbox_id":%q}}}`, i+1, id))
	}
	return out
}

func mcpHeader(key string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {"2025-11-25"}}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	return h
}

// startReference builds and starts one of the reference servers.
func startReference(ctx context.Context, repo, tmp, pkg, name, simURL, e2bKey string) (*proc, string, error) {
	bin, err := buildBinary(ctx, repo, tmp, pkg, name)
	if err != nil {
		return nil, "", err
	}
	addr, err := freePort()
	if err != nil {
		return nil, "", err
	}
	p, err := startProc(name, bin, []string{"--listen", addr, "--e2b", simURL, "--e2b-key", e2bKey}, os.Environ())
	if err != nil {
		return nil, "", err
	}
	u := "http://" + addr
	if err := p.waitHTTP(u+"/", true, 15*time.Second); err != nil {
		p.stop()
		return nil, "", err
	}
	return p, u, nil
}

// runComparison runs rounds of a closed loop at concurrency n over each
// target in turn (rotating which goes first), and takes each one's median.
func runComparison(ctx context.Context, targets []target, n, rounds int, d, warmup time.Duration, logf func(string, ...any)) comparison {
	cmp := comparison{Concurrency: n, Rounds: rounds, RoundSec: d.Seconds()}
	all := make([][]stats, len(targets))
	cpu := make([][]float64, len(targets))
	callers := make([][]caller, len(targets))
	for i, t := range targets {
		callers[i] = t.callers(n)
		closedLoop(ctx, callers[i], warmup)
	}
	for r := range rounds {
		for k := range targets {
			i := (k + r) % len(targets)
			if ctx.Err() != nil {
				break
			}
			u0 := readUsage(targets[i].pid)
			st := closedLoop(ctx, callers[i], d)
			u1 := readUsage(targets[i].pid)
			all[i] = append(all[i], st)
			if calls := st.Calls + st.Errors; calls > 0 && u0.valid && u1.valid {
				cpu[i] = append(cpu[i], float64((u1.cpu-u0.cpu).Microseconds())/1000/float64(calls))
			}
			logf("round %d/%d %-16s %8.0f calls/s, %d errors", r+1, rounds, targets[i].name, st.CallsPerSec, st.Errors)
		}
	}
	for i, t := range targets {
		res := compareResult{Name: t.name}
		var rates, p50s, p99s []float64
		for _, st := range all[i] {
			rates, p50s, p99s = append(rates, st.CallsPerSec), append(p50s, st.P50), append(p99s, st.P99)
			res.Errors += st.Errors
			if res.ErrorSample == "" {
				res.ErrorSample = st.ErrorSample
			}
		}
		res.Rounds = rates
		res.CallsPerSec, res.P50, res.P99, res.CPUms = median(rates), median(p50s), median(p99s), median(cpu[i])
		cmp.Targets = append(cmp.Targets, res)
	}
	for _, cs := range callers {
		closeAll(cs)
	}
	return cmp
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// openComparison offers rate calls/s to the gateway, then to e2bsim, for d
// each, sampling the gateway's RSS every second.
func openComparison(ctx context.Context, gw, direct []caller, gwPID int, rate float64, d, warmup time.Duration) *openCompare {
	oc := &openCompare{Rate: rate, Seconds: d.Seconds()}
	openLoop(ctx, gw, rate, warmup)
	stopSampling := sampleEvery(time.Second, func() {
		if u := readUsage(gwPID); u.valid {
			oc.RSSSamplesMB = append(oc.RSSSamplesMB, float64(u.rss)/(1<<20))
		}
	})
	oc.Gateway = openLoop(ctx, gw, rate, d)
	stopSampling()
	if n := len(oc.RSSSamplesMB); n > 0 {
		oc.RSSStartMB, oc.RSSEndMB = oc.RSSSamplesMB[0], oc.RSSSamplesMB[n-1]
		oc.RSSPeakMB = slices.Max(oc.RSSSamplesMB)
	}
	openLoop(ctx, direct, rate, warmup)
	oc.Direct = openLoop(ctx, direct, rate, d)
	oc.AddedP50, oc.AddedP99 = oc.Gateway.P50-oc.Direct.P50, oc.Gateway.P99-oc.Direct.P99
	return oc
}

func printComparison(w io.Writer, cmp *comparison) {
	fmt.Fprintf(w, "tools/call e2b_get_sandbox, raw HTTP load, %d connections, median of %d interleaved rounds of %.0f s\n",
		cmp.Concurrency, cmp.Rounds, cmp.RoundSec)
	fmt.Fprintf(w, "%-18s %9s %9s %8s %8s %7s  %s\n", "target", "calls/s", "cpu ms", "p50 ms", "p99 ms", "errors", "rounds")
	var gw float64
	for _, t := range cmp.Targets {
		if t.Name == "gateway" {
			gw = t.CallsPerSec
		}
	}
	for _, t := range cmp.Targets {
		rounds := make([]string, len(t.Rounds))
		for i, r := range t.Rounds {
			rounds[i] = fmt.Sprintf("%.0f", r)
		}
		fmt.Fprintf(w, "%-18s %9.0f %9.3f %8.2f %8.2f %7d  %s\n", t.Name, t.CallsPerSec, t.CPUms, t.P50, t.P99, t.Errors,
			strings.Join(rounds, " "))
	}
	// Besides the ratio of the medians, the median of the ratios within
	// each round (adjacent turns share the machine's load best) and the
	// ratio of CPU per call, which other work on the machine moves least.
	fmt.Fprintln(w, "\nratios, gateway over each target (same run): medians of calls/s | median of per-round ratios | target's CPU per call over the gateway's")
	var gwRounds []float64
	var gwCPU float64
	for _, t := range cmp.Targets {
		if t.Name == "gateway" {
			gwRounds, gwCPU = t.Rounds, t.CPUms
		}
	}
	for _, t := range cmp.Targets {
		if t.Name == "gateway" || t.CallsPerSec == 0 {
			continue
		}
		var per []float64
		for i := range min(len(gwRounds), len(t.Rounds)) {
			if t.Rounds[i] > 0 {
				per = append(per, gwRounds[i]/t.Rounds[i])
			}
		}
		cpu := 0.0
		if gwCPU > 0 {
			cpu = t.CPUms / gwCPU
		}
		fmt.Fprintf(w, "  gateway / %-16s %5.2fx | %5.2fx | %5.2fx\n", t.Name, gw/t.CallsPerSec, median(per), cpu)
	}
	for _, t := range cmp.Targets {
		if t.ErrorSample != "" {
			fmt.Fprintf(w, "%s: %d errors, e.g. %s\n", t.Name, t.Errors, t.ErrorSample)
		}
	}
	if o := cmp.Open; o != nil {
		fmt.Fprintf(w, "\nopen loop, %.0f calls/s offered for %.0f s: gateway p50 %.2f p99 %.2f ms, e2bsim p50 %.2f p99 %.2f ms; added p50 %.2f ms, p99 %.2f ms; errors %d/%d\n",
			o.Rate, o.Seconds, o.Gateway.P50, o.Gateway.P99, o.Direct.P50, o.Direct.P99, o.AddedP50, o.AddedP99,
			o.Gateway.Errors, o.Direct.Errors)
		fmt.Fprintf(w, "gateway RSS over the open loop: %.1f MB at the start, %.1f MB at the end, %.1f MB peak\n",
			o.RSSStartMB, o.RSSEndMB, o.RSSPeakMB)
	}
	fmt.Fprintln(w)
}

// compareTargets starts the reference servers and runs the comparison and
// its open-loop phase.
func compareTargets(ctx context.Context, c config, repo, tmp, gwURL string, gwPID int, simURL string, simPID int,
	e2bKey string, fx *fixture, logf func(string, ...any)) (*comparison, error) {
	logf("building and starting the reference servers")
	sdkP, sdkURL, err := startReference(ctx, repo, tmp, "./bench/sdkserver", "sdkserver", simURL, e2bKey)
	if err != nil {
		return nil, err
	}
	defer sdkP.stop()
	hopP, hopURL, err := startReference(ctx, repo, tmp, "./bench/onehop", "onehop", simURL, e2bKey)
	if err != nil {
		return nil, err
	}
	defer hopP.stop()
	bodies := toolsCallBodies(fx.sandboxes)
	var direct []string
	for _, id := range fx.sandboxes {
		direct = append(direct, simURL+"/sandboxes/"+id)
	}
	mcpTarget := func(url string, keys []string) func(n int) []caller {
		return func(n int) []caller {
			hc := &http.Client{Transport: newTransport(n), Timeout: 60 * time.Second}
			cs := make([]caller, n)
			for i := range cs {
				key := ""
				if keys != nil {
					key = keys[i%len(keys)]
				}
				cs[i] = &rawCaller{http: hc, method: http.MethodPost, url: url, header: mcpHeader(key), bodies: bodies,
					offset: i, ok: mcpOK}
			}
			return cs
		}
	}
	directTarget := func(n int) []caller {
		hc := &http.Client{Transport: newTransport(n), Timeout: 60 * time.Second}
		cs := make([]caller, n)
		for i := range cs {
			cs[i] = &rawCaller{http: hc, method: http.MethodGet, header: http.Header{"X-API-Key": {e2bKey}}, urls: direct,
				offset: i, ok: func([]byte) bool { return true }}
		}
		return cs
	}
	targets := []target{
		{name: "gateway", pid: gwPID, callers: mcpTarget(gwURL+"/mcp", fx.mcpKeys)},
		{name: "go-sdk server", pid: sdkP.pid(), callers: mcpTarget(sdkURL+"/", nil)},
		{name: "one-hop handler", pid: hopP.pid(), callers: mcpTarget(hopURL+"/", nil)},
		{name: "e2bsim direct", pid: simPID, callers: directTarget},
	}
	logf("comparison: %d rounds of %s per target at %d connections", c.compareRounds, c.compareDur, c.compareConc)
	cmp := runComparison(ctx, targets, c.compareConc, c.compareRounds, c.compareDur, c.warmup, logf)
	if c.cpuprofile != "" && c.inprocess && ctx.Err() == nil {
		// A profile of the gateway alone under the comparison's load (the
		// load generator runs in this process too; its stacks are the
		// net/http client's).
		f, err := os.Create(c.cpuprofile + ".compare")
		if err != nil {
			return nil, err
		}
		cs := targets[0].callers(c.compareConc)
		if err := pprof.StartCPUProfile(f); err == nil {
			closedLoop(ctx, cs, 3*c.compareDur)
			pprof.StopCPUProfile()
		}
		f.Close()
		closeAll(cs)
	}
	if c.rate > 0 && ctx.Err() == nil {
		logf("open loop: %.0f calls/s for %s through the gateway, then direct", c.rate, c.openDur)
		cmp.Open = openComparison(ctx, targets[0].callers(c.openClients), directTarget(c.openClients), gwPID, c.rate,
			c.openDur, c.warmup)
	}
	return &cmp, nil
}
