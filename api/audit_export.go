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
	"time"

	"github.com/mcpgate/mcpgate"
)

// exportTimeout bounds one export. The JSON routes' 15 s deadline does not
// fit a download of millions of rows; a client that goes away ends it sooner,
// at the first write that fails.
const exportTimeout = time.Hour

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

	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), exportTimeout)
	defer cancel()
	name := "audit-" + ws.ID + "-" + time.Now().UTC().Format("20060102T150405Z") + "." + format
	bw := bufio.NewWriterSize(w, 64<<10)
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
