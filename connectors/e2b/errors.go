package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
)

// defaultRetryAfter is the wait suggested on a 429 without a usable
// Retry-After header.
const defaultRetryAfter = 30

// knownErrorCodes are E2B's error_code values: a closed list we trust to be
// free of secrets, unlike free-form messages.
var knownErrorCodes = map[string]string{
	"sandbox_capacity_unavailable":     "E2B has no capacity for new sandboxes right now",
	"sandbox_placement_timeout":        "E2B timed out placing the sandbox on a node",
	"sandbox_no_compatible_node":       "E2B has no node compatible with this template right now",
	"sandbox_create_failed":            "E2B failed to create the sandbox",
	"internal_server_error":            "E2B had an internal error",
	"sandbox_memory_override_disabled": "the memory option is not enabled for this team",
}

// statusError turns a non-2xx E2B answer into a coded, actionable error. The
// raw body never goes into the error: only a vetted message (safeMessage) and
// a known error_code.
func statusError(c call, status int, header http.Header, raw []byte) error {
	var body apiError
	_ = json.Unmarshal(raw, &body) // a non-JSON error body still maps by status
	errCode := ""
	if _, ok := knownErrorCodes[body.ErrorCode]; ok {
		errCode = body.ErrorCode
	}
	said := safeMessage(body.Message)
	what := c.what
	if what == "" {
		what = "the requested object"
	}

	var code mcpgate.Code
	var msg string
	var cause error = &connectors.UpstreamError{Status: status, Code: errCode}
	switch {
	case status == http.StatusBadRequest && strings.Contains(strings.ToLower(body.Message), "secured access"):
		// infra handlers/sandbox_create.go (getEnvdAccessToken): secure needs
		// a template built with envd 0.2.0 or newer.
		code, cause = mcpgate.EInvalid, fmt.Errorf("%w: %w", errSecureUnsupported, cause)
		msg = "E2B refused secure for " + what + ": the template was built with an envd older than 0.2.0, " +
			"which has no secured access; create the sandbox with secure=false, or rebuild the template"
	case status == http.StatusBadRequest:
		code = mcpgate.EInvalid
		msg = "E2B rejected the request to " + c.op + " as invalid"
		if p := badParameter(body.Message); p != "" {
			msg += ": check the " + p + " parameter"
		}
		if errCode != "" {
			msg += " (" + knownErrorCodes[errCode] + ")"
		}
	case status == http.StatusUnauthorized:
		code = mcpgate.EUnauthorized
		msg = "E2B rejected the stored API key: it is wrong, revoked, or not a team API key. " +
			"A workspace admin must reconnect E2B on the mcpgate dashboard with a team API key (e2b_…) " +
			"from the E2B dashboard's API Keys page"
	case status == http.StatusForbidden:
		code = mcpgate.EForbidden
		msg = cmpOr(c.forbidden, "E2B refused to "+c.op+": the team is not allowed to do this "+
			"(another team's template, a feature not enabled for the team, or a blocked team)")
	case status == http.StatusNotFound:
		code = mcpgate.ENotFound
		msg = cmpOr(c.notFound, what+" was not found on E2B")
	case status == http.StatusConflict:
		code = mcpgate.EConflict
		msg = cmpOr(c.conflict, what+" is not in a state that allows this (E2B answered 409)")
	case status == http.StatusTooManyRequests && header.Get("Retry-After") == "":
		// E2B's rate limiter always sends Retry-After; its concurrency limit
		// never does (infra orchestrator/create_instance.go), and waiting a
		// fixed time does not lift that one.
		e := mcpgate.WrapError(mcpgate.ETooMany, cause, fmt.Sprintf(
			"E2B refused to %s: the team is at its limit of concurrent sandboxes. Pause or kill a running sandbox "+
				"(ask the user which), or wait for one to end, before trying again; do not retry in a loop", c.op))
		e.RetryAfter = defaultRetryAfter
		return e
	case status == http.StatusTooManyRequests:
		wait := retryAfter(header.Get("Retry-After"), time.Now())
		e := mcpgate.WrapError(mcpgate.ETooMany, cause, fmt.Sprintf(
			"E2B is rate-limiting this team; wait %d seconds before trying to %s again, and do not retry in a loop", wait, c.op))
		e.RetryAfter = wait
		return e
	case status == http.StatusServiceUnavailable:
		code = mcpgate.EUnavailable
		msg = "E2B is temporarily unavailable (HTTP 503); try again in a few minutes"
	case status >= 500:
		code = mcpgate.EUpstream
		msg = fmt.Sprintf("E2B had a problem on its side while trying to %s (HTTP %d); try again later", c.op, status)
	default:
		code = mcpgate.EUpstream
		msg = fmt.Sprintf("E2B answered %s with an unexpected HTTP %d", c.op, status)
	}
	if errCode != "" && status >= 500 {
		msg += " (" + knownErrorCodes[errCode] + ")"
	}
	if said != "" && status != http.StatusUnauthorized {
		msg += `. E2B said: "` + said + `"`
	}
	return mcpgate.WrapError(code, cause, msg)
}

// errSecureUnsupported marks E2B's 400 for secure on a template whose envd
// predates secured access.
var errSecureUnsupported = errors.New("template does not support secure")

// upstreamFailure is a 2xx (or other) answer we could not use.
func upstreamFailure(status int, errCode, msg string) error {
	return mcpgate.WrapError(mcpgate.EUpstream, &connectors.UpstreamError{Status: status, Code: errCode}, msg)
}

// retryAfter reads a Retry-After header (seconds or an HTTP date) and returns
// a wait in whole seconds, at least 1.
func retryAfter(h string, now time.Time) int {
	h = strings.TrimSpace(h)
	if n, err := strconv.Atoi(h); err == nil && n > 0 {
		return min(n, 3600)
	}
	if t, err := http.ParseTime(h); err == nil {
		if d := int(t.Sub(now).Round(time.Second) / time.Second); d > 0 {
			return min(d, 3600)
		}
		return 1
	}
	return defaultRetryAfter
}

// parameters are the request parameters E2B's 400 messages may name, with the
// name the tools use for them.
var parameters = []struct{ e2b, tool string }{
	{"templateID", "template_id"}, {"template", "template"}, {"timeout", "timeout"},
	{"metadata", "metadata"}, {"startedAfter", "started_after"}, {"nextToken", "next_token"},
	{"next token", "next_token"}, {"limit", "limit"}, {"state", "state"}, {"cursor", "cursor"},
	{"direction", "direction"}, {"level", "level"}, {"search", "search"}, {"start", "start"},
	{"end", "end"}, {"sandbox ID", "sandbox_id"}, {"sandboxID", "sandbox_id"}, {"memory", "memory"},
	{"autoPause", "auto_pause"}, {"envVars", "env_vars"}, {"allow_internet_access", "allow_internet_access"},
}

// badParameter names the tool parameter an E2B 400 message is about, if any.
func badParameter(message string) string {
	lower := strings.ToLower(message)
	for _, p := range parameters {
		if strings.Contains(lower, strings.ToLower(p.e2b)) {
			return p.tool
		}
	}
	return ""
}

// tokenLike matches runs long enough to be a credential; sandbox ids (21
// characters) stay shorter.
var tokenLike = regexp.MustCompile(`[A-Za-z0-9+/=_\-.]{28,}`)

// safeMessage returns E2B's error message when it is short, printable text
// that cannot be carrying a secret, and "" otherwise. E2B's messages name
// sandboxes and parameters, which helps the model; but they are free text, so
// anything that looks like a credential or mentions one is dropped.
func safeMessage(m string) string {
	m = strings.Join(strings.Fields(m), " ")
	if m == "" || len(m) > 200 || tokenLike.MatchString(m) {
		return ""
	}
	lower := strings.ToLower(m)
	for _, w := range []string{"token", "password", "secret", "authorization", "api key", "apikey", "x-api-key", "header", "e2b_"} {
		if strings.Contains(lower, w) {
			return ""
		}
	}
	for _, r := range m {
		if !unicode.IsPrint(r) {
			return ""
		}
	}
	return strings.TrimSuffix(m, ".")
}
