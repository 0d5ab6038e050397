package e2bsim

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Logs and metrics are generated, not stored: a deterministic function of
// the sandbox and the time, so any window can be served without memory
// growing with uptime.

const (
	logStep   = 10 * time.Second
	retention = 7 * 24 * time.Hour
	// CPUMetadataKey, set in a sandbox's metadata to a percentage, fixes the
	// base of its generated CPU use: "1" makes an idle sandbox, "50" a busy
	// one. Samples vary by ±20% around it. Without it the base is derived
	// from the sandbox id, between 0 and 60.
	CPUMetadataKey = "e2bsim_cpu"
)

var (
	// Every generated line has a level: E2B's log entries always carry one.
	logLevels   = []string{"info", "debug", "info", "warn", "info", "error", "info", "info"}
	logMessages = []string{"GET /health 200", "envd heartbeat", "process started: python app.py",
		"slow response from upstream", "wrote 4 KiB to /home/user/out.txt", "process exited with code 1",
		"GET /files 200", "stdout: hello from the sandbox"}
	levelRank = map[string]int{"debug": 0, "info": 1, "": 1, "warn": 2, "error": 3}
)

type logEntry struct {
	Timestamp time.Time         `json:"timestamp"`
	Level     string            `json:"level"`
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields"`
}

func (sb *sandbox) logAt(i int64) logEntry {
	n := int(i % int64(len(logLevels)))
	return logEntry{Timestamp: sb.createdAt.Add(time.Duration(i) * logStep), Level: logLevels[n],
		Message: fmt.Sprintf("%s (#%d)", logMessages[n], i), Fields: map[string]string{"sandboxID": sb.id, "seq": fmt.Sprint(i)}}
}

func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, ok := parseSandboxID(w, r.PathValue("sandboxID"))
	if !ok {
		return
	}
	var cursor int64
	if v := q.Get("cursor"); v != "" {
		c, err := strconv.ParseInt(v, 10, 64)
		if err != nil || c < 0 {
			writeError(w, http.StatusBadRequest, `parameter "cursor" in query has an error: value must be an integer`, "")
			return
		}
		cursor = c
	}
	limit, ok := parseIntParam(w, "limit", q.Get("limit"), 1000, 0, 1000)
	if !ok {
		return
	}
	dir := q.Get("direction")
	if dir == "" {
		dir = "backward" // E2B's unstated default: newest first
	}
	if dir != "forward" && dir != "backward" {
		writeError(w, http.StatusBadRequest, `parameter "direction" in query has an error: value is not one of the allowed values ["forward","backward"]`, "")
		return
	}
	level := q.Get("level")
	if _, known := levelRank[level]; q.Has("level") && (!known || level == "") {
		writeError(w, http.StatusBadRequest, `parameter "level" in query has an error: value is not one of the allowed values ["debug","info","warn","error"]`, "")
		return
	}
	search := q.Get("search")
	if len(search) > 256 {
		writeError(w, http.StatusBadRequest, `parameter "search" in query has an error: maximum string length is 256`, "")
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.team(r)
	out := []logEntry{}
	sb := s.telemetryOf(t, id)
	if sb == nil {
		// E2B does not check the sandbox here (infra handlers/sandbox_logs.go
		// asks the log store only): unknown ids get no logs, not the 404 the
		// OpenAPI file lists.
		writeJSON(w, http.StatusOK, map[string]any{"logs": out})
		return
	}
	now := s.now()
	lo, hi := now.Add(-retention), now
	if q.Has("cursor") {
		c := time.UnixMilli(cursor)
		if dir == "forward" {
			lo, hi = c, c.Add(retention)
		} else {
			lo, hi = c.Add(-retention), c
		}
	}
	lo, hi = maxTime(lo, now.Add(-retention)), minTime(hi, now, sb.activeUntil(now))
	first := max(0, ceilDiv(lo.Sub(sb.createdAt), logStep))
	last := int64(hi.Sub(sb.createdAt) / logStep)
	if hi.Before(sb.createdAt) {
		last = -1
	}
	minRank := 0 // no level: everything
	if level != "" {
		minRank = levelRank[level]
	}
	keep := func(i int64) bool {
		e := sb.logAt(i)
		if e.Timestamp.Before(lo) || e.Timestamp.After(hi) || levelRank[e.Level] < minRank || !strings.Contains(e.Message, search) {
			return false
		}
		out = append(out, e)
		return len(out) >= limit
	}
	if limit > 0 {
		if dir == "forward" {
			for i := first; i <= last && !keep(i); i++ {
			}
		} else {
			for i := last; i >= first && !keep(i); i-- {
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"logs": out})
}

type metric struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int32     `json:"cpuCount"`
	CPUUsedPct    float64   `json:"cpuUsedPct"`
	MemUsed       int64     `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	MemCache      int64     `json:"memCache"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

// metricStep is E2B's sample step for a range.
func metricStep(d time.Duration) time.Duration {
	switch {
	case d < time.Hour:
		return 5 * time.Second
	case d < 6*time.Hour:
		return 30 * time.Second
	case d < 12*time.Hour:
		return time.Minute
	case d < 24*time.Hour:
		return 2 * time.Minute
	case d < 7*24*time.Hour:
		return 5 * time.Minute
	default:
		return 15 * time.Minute
	}
}

// cpuBase is the sandbox's typical CPU use in percent.
func (sb *sandbox) cpuBase() float64 {
	if v, err := strconv.ParseFloat(sb.metadata[CPUMetadataKey], 64); err == nil && v >= 0 {
		return v
	}
	return float64(hashN("cpu", sb.id)%600) / 10
}

func (sb *sandbox) metricAt(t time.Time) metric {
	frac := float64(hashN("sample", sb.id, fmt.Sprint(t.Unix()))%1000) / 1000
	cpu := math.Min(100, sb.cpuBase()*(0.8+0.4*frac))
	memTotal := int64(sb.memMB) << 20
	diskTotal := int64(sb.diskMB) << 20
	return metric{Timestamp: t.UTC(), TimestampUnix: t.Unix(), CPUCount: sb.cpu, CPUUsedPct: math.Round(cpu*100) / 100,
		MemUsed: memTotal/4 + int64(frac*float64(memTotal/4)), MemTotal: memTotal, MemCache: memTotal / 10,
		DiskUsed: diskTotal/5 + int64(frac*float64(diskTotal/100)), DiskTotal: diskTotal}
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, ok := parseSandboxID(w, r.PathValue("sandboxID"))
	if !ok {
		return
	}
	var bounds [2]*time.Time
	for i, name := range []string{"start", "end"} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || n > 1<<40 {
				writeError(w, http.StatusBadRequest, fmt.Sprintf(`parameter %q in query has an error: value must be Unix seconds`, name), "")
				return
			}
			t := time.Unix(n, 0)
			bounds[i] = &t
		}
	}
	if bounds[0] != nil && bounds[1] != nil && bounds[0].After(*bounds[1]) {
		writeError(w, http.StatusBadRequest, "start time must be before end time", "")
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.team(r)
	out := []metric{}
	sb := s.telemetryOf(t, id)
	if sb == nil {
		writeJSON(w, http.StatusOK, out) // E2B does not check the sandbox here either
		return
	}
	first, lastT := sb.createdAt, sb.activeUntil(s.now())
	start, end := first, lastT
	if bounds[0] != nil {
		start = *bounds[0]
	}
	if bounds[1] != nil {
		end = *bounds[1]
	}
	step := metricStep(end.Sub(start))
	from, to := maxTime(start, first), minTime(end, lastT)
	for k := max(0, ceilDiv(from.Sub(first), step)); len(out) < 20000; k++ {
		ts := first.Add(time.Duration(k) * step)
		if ts.After(to) {
			break
		}
		out = append(out, sb.metricAt(ts))
	}
	writeJSON(w, http.StatusOK, out)
}

// telemetryOf returns the team's sandbox of that id, live or ended within
// the retention: E2B keeps logs about 7 days and metrics after a sandbox is
// killed or expires. Callers hold s.mu.
func (s *Server) telemetryOf(t *team, id string) *sandbox {
	sb := s.sandboxes[id]
	if sb == nil {
		sb = s.ended[id]
	}
	if sb == nil || sb.team != t.id {
		return nil
	}
	return sb
}

func ceilDiv(d, step time.Duration) int64 {
	n := int64(d / step)
	if d > 0 && d%step != 0 {
		n++
	}
	return n
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(ts ...time.Time) time.Time {
	m := ts[0]
	for _, t := range ts[1:] {
		if t.Before(m) {
			m = t
		}
	}
	return m
}
