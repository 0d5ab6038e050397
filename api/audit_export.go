package api

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate"
)

// What bounds one export. The JSON routes' 15 s deadline does not fit a
// download of millions of rows, so an export runs on the request's own
// context, which ends when the client goes away, under these bounds:
//   - exportTimeout in all;
//   - exportWriteTimeout for each chunk written (a reader that stops
//     reading fails the export, rather than holding its pool connection);
//   - exportIdleTimeout between two rows from the database (a database
//     that hangs mid-export ends it);
//   - exportsPerUser at once per person on this instance, and the pool's
//     long-read slots (store.LongReadSlots) at once on the instance: beyond
//     them a 429 with Retry-After, so that no tenant, and no number of
//     tenants, takes the connections other tenants' calls need.
const (
	exportTimeout      = time.Hour
	exportWriteTimeout = 30 * time.Second
	exportIdleTimeout  = 30 * time.Second
	exportsPerUser     = 2
	exportRetryAfter   = 30
)

// exportLimiter counts the exports under way per person.
type exportLimiter struct {
	mu      sync.Mutex
	running map[string]int
}

// take counts one more export for userID, or refuses it when the person
// has exportsPerUser running. The returned func counts it done.
func (l *exportLimiter) take(userID string) (func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running[userID] >= exportsPerUser {
		return nil, &mcpgate.Error{Code: mcpgate.ETooMany, RetryAfter: exportRetryAfter,
			Message: "you have " + strconv.Itoa(exportsPerUser) + " audit exports running; wait for one to finish"}
	}
	if l.running == nil {
		l.running = map[string]int{}
	}
	l.running[userID]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.running[userID]--; l.running[userID] <= 0 {
			delete(l.running, userID)
		}
	}, nil
}

// chunkDeadline is the response writer of an export: each write to the
// connection (a chunk of the buffered stream) must finish within d, so a
// reader that stops reading ends the export after d instead of the
// server's WriteTimeout cutting a long download short.
type chunkDeadline struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (c chunkDeadline) Write(p []byte) (int, error) {
	// A ResponseWriter that cannot take deadlines (a test recorder) is
	// written without one.
	if err := c.rc.SetWriteDeadline(time.Now().Add(c.d)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return 0, err
	}
	return c.w.Write(p)
}

// auditCSVHeader is the export's CSV columns, in order (README: Audit log
// export).
var auditCSVHeader = []string{"id", "created_at", "workspace_id", "kind", "action", "source", "actor_id", "actor_email",
	"key_id", "outcome", "upstream_status", "duration_ms", "message", "arguments"}

// handleAuditExport streams the audit log as NDJSON (one event a line, the
// list's item format) or CSV, with the list's visibility: admins every event,
// members their own. Filters: since, until (RFC 3339), tool or action, kind,
// outcome, source, and actor for admins. The export is itself audited.
func (s *Server) handleAuditExport(w http.ResponseWriter, r *http.Request) {
	ws := mcpgate.WorkspaceFromContext(r.Context())
	q := r.URL.Query()
	format := q.Get("format")
	if format == "" {
		format = "ndjson"
	}
	if format != "ndjson" && format != "csv" {
		WriteError(w, r, s.log, mcpgate.Errorf(mcpgate.EInvalid, "format must be ndjson or csv"))
		return
	}
	f, err := auditFilter(q)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	// An export is every matching row, not a page.
	f.Cursor, f.Limit = "", 0

	done, err := s.exports.take(actorFrom(r).UserID)
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	defer done()

	// The request's context without the JSON routes' 15 s deadline: it
	// still ends when the client goes away.
	base, cancelBase := untimed(r)
	defer cancelBase()
	ctx, cancel := context.WithTimeoutCause(base, exportTimeout, errExportTooLong)
	defer cancel()
	idle := time.AfterFunc(exportIdleTimeout, cancel)
	defer idle.Stop()
	name := "audit-" + ws.ID + "-" + time.Now().UTC().Format("20060102T150405Z") + "." + format
	bw := bufio.NewWriterSize(chunkDeadline{w: w, rc: http.NewResponseController(w), d: exportWriteTimeout}, 64<<10)
	var cw *csv.Writer
	enc := json.NewEncoder(bw)
	started := false
	// Headers go out with the first row (or at the end), so that an error
	// before any row, such as a malformed actor, is still a JSON error.
	start := func() error {
		started = true
		h := w.Header()
		if format == "csv" {
			h.Set("Content-Type", "text/csv; charset=utf-8")
		} else {
			h.Set("Content-Type", "application/x-ndjson")
		}
		h.Set("Content-Disposition", `attachment; filename="`+name+`"`)
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		if format == "csv" {
			cw = csv.NewWriter(bw)
			return cw.Write(auditCSVHeader)
		}
		return nil
	}
	rows, err := s.svc.Audit.Export(ctx, actorFrom(r), f, func(e *mcpgate.AuditEvent) error {
		idle.Reset(exportIdleTimeout)
		if !started {
			if err := start(); err != nil {
				return err
			}
		}
		if format == "csv" {
			return cw.Write(auditCSVRecord(e))
		}
		return enc.Encode(e)
	})
	if err == nil && !started {
		err = start()
	}
	if err == nil && cw != nil {
		cw.Flush()
		err = cw.Error()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		if !started {
			WriteError(w, r, s.log, err)
			return
		}
		// Mid-stream the status is already 200: end the response without its
		// last chunk, so that the client sees a failed download rather than a
		// file that looks complete.
		if !errors.Is(err, context.Canceled) {
			s.log.WarnContext(r.Context(), "audit export ended early", "rows", rows, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}

var errExportTooLong = errors.New("audit export ran longer than " + exportTimeout.String())

// auditCSVRecord is one CSV row. Free-text cells that a spreadsheet would run
// as a formula (=, +, -, @ first) get a leading apostrophe, as OWASP
// advises; NDJSON carries the exact values.
func auditCSVRecord(e *mcpgate.AuditEvent) []string {
	args := ""
	if len(e.Arguments) > 0 {
		b, _ := json.Marshal(e.Arguments)
		args = string(b)
	}
	status := ""
	if e.UpstreamStatus != 0 {
		status = strconv.Itoa(e.UpstreamStatus)
	}
	return []string{strconv.FormatInt(e.ID, 10), e.CreatedAt.UTC().Format(time.RFC3339Nano), e.WorkspaceID, string(e.Kind),
		noFormula(e.Action), string(e.Source), e.ActorID, noFormula(e.ActorEmail), noFormula(e.KeyID), string(e.Outcome), status,
		strconv.FormatFloat(e.DurationMS, 'f', -1, 64), noFormula(e.Message), noFormula(args)}
}

func noFormula(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
