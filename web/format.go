package web

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"
	"unicode"
)

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return fmtTime(*t)
}

func fmtRFC3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// timeAgo says how long ago (or from now) t is, in words a person reads at a
// glance: "3 min ago", "in 2 h".
func timeAgo(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	// Round to the nearest unit, not down: a key created "in 90 days" is
	// read a few seconds later, 89.99 days ahead, and must still say 90.
	var s string
	minutes, hours, days := math.Round(d.Minutes()), math.Round(d.Hours()), math.Round(d.Hours()/24)
	switch {
	case d < time.Minute:
		if !future {
			return "just now"
		}
		s = "<1 min"
	case minutes < 60:
		s = fmt.Sprintf("%d min", int(minutes))
	case hours < 48:
		s = fmt.Sprintf("%d h", int(hours))
	default:
		s = fmt.Sprintf("%d days", int(days))
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

func agoPtr(now time.Time, t *time.Time) string {
	if t == nil {
		return "never"
	}
	return timeAgo(now, *t)
}

func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// compactJSON shows a value (audit arguments) as one line of JSON; the
// template escapes it like any other text.
func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// initial is the first letter of an email, for the avatar.
func initial(s string) string {
	for _, r := range s {
		return string(unicode.ToUpper(r))
	}
	return "?"
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// safeNext returns a local path to go to after login, or "" when next could
// lead off-site (absolute URLs, //host, backslashes).
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") {
		return ""
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return ""
	}
	return next
}
