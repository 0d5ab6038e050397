package api

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/mcpgate/mcpgate"
)

// A JSON route is written as its logic alone: it reads what it needs from the
// request (and, for routeBody, the decoded body) and returns its reply or an
// error. route and routeBody do the rest the same way for every route: the
// bounded, strict body decoding, the error table, and writing the answer.

// reply is what a JSON route answers when it succeeds.
type reply struct {
	status int
	// body is written as JSON; nil writes no body (204 and the like).
	body any
	// cookie, when set, runs before the answer is written: the routes that
	// sign a person in or out set or clear the session cookie with it. Its
	// error is answered like the route's own.
	cookie func(http.ResponseWriter) error
}

func ok(body any) reply      { return reply{status: http.StatusOK, body: body} }
func created(body any) reply { return reply{status: http.StatusCreated, body: body} }

// accepted is a 202 whose body tells the person what happens next.
func accepted(status string) reply {
	return reply{status: http.StatusAccepted, body: map[string]string{"status": status}}
}

var noContent = reply{status: http.StatusNoContent}

// listOf is a list answer, {"<name>": [...]}: an empty list is [] and never
// null, so clients can range over it without a check.
func listOf[T any](name string, items []T) map[string]any {
	if items == nil {
		items = []T{}
	}
	return map[string]any{name: items}
}

// route adapts a JSON route that reads no request body.
func (s *Server) route(do func(r *http.Request) (reply, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rep, err := do(r)
		s.answer(w, r, rep, err)
	}
}

// routeBody adapts a JSON route whose request body decodes into In (see
// decodeJSON for what is refused).
func routeBody[In any](s *Server, do func(r *http.Request, in In) (reply, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in In
		if err := decodeJSON(w, r, &in); err != nil {
			WriteError(w, r, s.log, err)
			return
		}
		rep, err := do(r, in)
		s.answer(w, r, rep, err)
	}
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, rep reply, err error) {
	if err == nil && rep.cookie != nil {
		err = rep.cookie(w)
	}
	if err != nil {
		WriteError(w, r, s.log, err)
		return
	}
	if rep.body == nil {
		w.WriteHeader(rep.status)
		return
	}
	writeJSON(w, rep.status, rep.body)
}

// auditFilter reads the audit routes' filters from a query: since and until
// (RFC 3339), tool (or action), kind, outcome, source, actor and cursor. The
// list and the export take the same ones.
func auditFilter(q url.Values) (mcpgate.AuditFilter, error) {
	f := mcpgate.AuditFilter{Action: q.Get("tool"), Outcome: mcpgate.Outcome(q.Get("outcome")), Kind: mcpgate.AuditKind(q.Get("kind")),
		Source: mcpgate.Source(q.Get("source")), Cursor: q.Get("cursor"), ActorID: q.Get("actor")}
	if f.Action == "" {
		f.Action = q.Get("action")
	}
	for name, dst := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return f, mcpgate.Errorf(mcpgate.EInvalid, "%s must be an RFC 3339 time", name)
			}
			*dst = t
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			return f, mcpgate.Errorf(mcpgate.EInvalid, "limit must be 1 to 200")
		}
		f.Limit = n
	}
	return f, nil
}
