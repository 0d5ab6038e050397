package e2bsim

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// parseLimit reads a limit query parameter with E2B's bounds (1 to max, a
// larger value is refused, not clamped) and writes the 400 itself.
func parseLimit(w http.ResponseWriter, v string, def int) (int, bool) {
	return parseIntParam(w, "limit", v, def, 1, 100)
}

func parseIntParam(w http.ResponseWriter, name, v string, def, lo, hi int) (int, bool) {
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		writeError(w, http.StatusBadRequest, fmt.Sprintf(`parameter %q in query has an error: value %s: an invalid integer`, name, v), "")
		return 0, false
	case n < lo:
		writeError(w, http.StatusBadRequest, fmt.Sprintf(`parameter %q in query has an error: number must be at least %d`, name, lo), "")
		return 0, false
	case n > hi:
		writeError(w, http.StatusBadRequest, fmt.Sprintf(`parameter %q in query has an error: number must be at most %d`, name, hi), "")
		return 0, false
	}
	return n, true
}

// parseMetadata parses E2B's metadata filter as the server does (infra
// packages/api/internal/utils/sandboxes_list.go, parseFilters): the query
// value, already decoded once by the framework, is unescaped as a whole, split
// on & and then on = (exactly one per pair), and each key and value is
// unescaped again. That is three levels in all, matching what the SDKs send.
func parseMetadata(v string) (map[string]string, bool) {
	out := map[string]string{}
	if v == "" {
		return out, true
	}
	v, err := url.QueryUnescape(v)
	if err != nil {
		return nil, false
	}
	for _, pair := range strings.Split(v, "&") {
		parts := strings.Split(pair, "=")
		if len(parts) != 2 {
			return nil, false
		}
		k, err1 := url.QueryUnescape(parts[0])
		val, err2 := url.QueryUnescape(parts[1])
		if err1 != nil || err2 != nil {
			return nil, false
		}
		out[k] = val
	}
	return out, true
}

// Sandbox list tokens are E2B's: base64url of RFC3339Nano__id, with __asc
// when ascending, so a token is bound to its order.
func sandboxToken(at time.Time, id, order string) string {
	s := at.UTC().Format(time.RFC3339Nano) + "__" + id
	if order == "asc" {
		s += "__asc"
	}
	return base64.URLEncoding.EncodeToString([]byte(s))
}

func parseSandboxToken(tok, order string) (time.Time, string, bool) {
	b, err := base64.URLEncoding.DecodeString(tok)
	if err != nil {
		return time.Time{}, "", false
	}
	parts := strings.Split(string(b), "__")
	asc := len(parts) == 3 && parts[2] == "asc"
	if len(parts) < 2 || len(parts) > 3 || (len(parts) == 3 && !asc) || asc != (order == "asc") {
		return time.Time{}, "", false
	}
	at, err := time.Parse(time.RFC3339Nano, parts[0])
	if err != nil {
		return time.Time{}, "", false
	}
	return at, parts[1], true
}

// pageTime is a sandbox's place in the list order: its start truncated to
// microseconds, as infra keys its pages (PaginationTimestamp).
func pageTime(sb *sandbox) time.Time { return sb.startedAt.Truncate(time.Microsecond) }

// sandboxAfter reports whether sb sorts after the cursor (at, id) (infra
// utils/sandboxes_list.go, FilterBasedOnCursor: equal times continue with
// greater ids when newest first, smaller ones when oldest first).
func sandboxAfter(sb *sandbox, at time.Time, id, order string) bool {
	if t := pageTime(sb); !t.Equal(at.Truncate(time.Microsecond)) {
		return t.After(at) == (order == "asc")
	}
	if sb.id == id {
		return false
	}
	return (sb.id > id) == (order == "desc")
}

// Other lists page by offset, in an opaque token.
func offsetToken(n int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(n)))
}

// pageOf applies limit and nextToken to a list of n items, writing the 400
// and X-Next-Token itself. It returns the slice bounds.
func pageOf(w http.ResponseWriter, q url.Values, n int) (int, int, bool) {
	limit, ok := parseLimit(w, q.Get("limit"), 100)
	if !ok {
		return 0, 0, false
	}
	start := 0
	if tok := q.Get("nextToken"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		v, found := strings.CutPrefix(string(b), "offset:")
		off, err2 := strconv.Atoi(v)
		if err != nil || !found || err2 != nil || off < 0 || off > n {
			writeError(w, http.StatusBadRequest, "Invalid next token", "")
			return 0, 0, false
		}
		start = off
	}
	end := min(start+limit, n)
	if end < n {
		w.Header().Set("X-Next-Token", offsetToken(end))
	}
	return start, end, true
}
