package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
)

// Defaults for Options.
const (
	DefaultBaseURL      = "https://api.e2b.app"
	DefaultDashboardURL = "https://dashboard-api.e2b.app"
	DefaultTimeout      = 30 * time.Second
	// MaxResponseBytes bounds every response body read from E2B.
	MaxResponseBytes = 8 << 20
)

// Options configures a Client. The zero value talks to production E2B.
type Options struct {
	// BaseURL is the control-plane API (E2B_API_URL).
	BaseURL string
	// DashboardURL is the dashboard API that serves the default templates
	// (E2B_DASHBOARD_API_URL).
	DashboardURL string
	// HTTPClient is used for every call. When nil, a dedicated client with
	// Timeout as its backstop is built: never http.DefaultClient.
	HTTPClient *http.Client
	// Timeout is the deadline of each call (default 30 s).
	Timeout time.Duration
	// Now replaces time.Now for the metrics windows of the tools (tests that
	// drive a simulator's clock).
	Now func() time.Time
}

// Client calls E2B with a team API key given on each call. It is safe for
// concurrent use and holds no credential.
type Client struct {
	base, dashboard string
	http            *http.Client
	timeout         time.Duration
	now             func() time.Time
}

// NewClient returns a client for opts.
func NewClient(opts Options) *Client {
	c := &Client{
		base:      strings.TrimRight(cmpOr(opts.BaseURL, DefaultBaseURL), "/"),
		dashboard: strings.TrimRight(cmpOr(opts.DashboardURL, DefaultDashboardURL), "/"),
		http:      opts.HTTPClient,
		timeout:   opts.Timeout,
		now:       opts.Now,
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.http == nil {
		// A little more than the per-call deadline, so that the context, which
		// gives the clearer error, normally fires first.
		c.http = &http.Client{Timeout: c.timeout + 5*time.Second, Transport: newTransport()}
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c
}

// newTransport keeps enough idle connections to E2B for a busy gateway:
// http.DefaultTransport keeps two per host, so concurrent calls would open
// (and leave in TIME_WAIT) a new TCP and TLS connection almost every time.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// call describes one E2B request and how to word its failures.
type call struct {
	op        string // "get sandbox": prefixes wrapped causes
	method    string
	path      string // already escaped
	query     url.Values
	body      any
	dashboard bool
	// what names the object for 404 and 409 messages: `sandbox "i…"`.
	what string
	// notFound and conflict, when set, replace the generic 404 and 409
	// messages with the operation's own explanation.
	notFound, conflict, forbidden string
}

// result is a successful response.
type result struct {
	status int
	header http.Header
}

// do runs c under the client's deadline and decodes a 2xx JSON body into out
// (when out is non-nil). Every failure is a coded *mcpgate.Error.
func (cl *Client) do(ctx context.Context, key mcpgate.Secret, c call, out any) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, cl.timeout)
	defer cancel()

	base := cl.base
	if c.dashboard {
		base = cl.dashboard
	}
	u := base + c.path
	if len(c.query) > 0 {
		u += "?" + c.query.Encode()
	}
	var body io.Reader
	if c.body != nil {
		b, err := json.Marshal(c.body)
		if err != nil {
			return result{}, fmt.Errorf("%s: encode body: %w", c.op, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, u, body)
	if err != nil {
		return result{}, fmt.Errorf("%s: build request: %w", c.op, err)
	}
	req.Header.Set("X-API-Key", key.Reveal())
	req.Header.Set("Accept", "application/json")
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}

	resp, err := cl.http.Do(req)
	if err != nil {
		return result{}, transportError(ctx, c.op, cl.timeout, err)
	}
	defer resp.Body.Close()
	// One byte more than the limit tells an oversized body from one that
	// fits exactly.
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return result{}, transportError(ctx, c.op, cl.timeout, err)
	}
	if len(raw) > MaxResponseBytes {
		return result{}, upstreamFailure(resp.StatusCode, "", fmt.Sprintf(
			"E2B sent a response larger than %d MiB to %s; narrow the request (a smaller limit or time range)",
			MaxResponseBytes>>20, c.op))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return result{}, statusError(c, resp.StatusCode, resp.Header, raw)
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(raw, out); err != nil {
			return result{}, upstreamFailure(resp.StatusCode, "", fmt.Sprintf(
				"E2B sent a response to %s that mcpgate could not read; try again later", c.op))
		}
	}
	return result{status: resp.StatusCode, header: resp.Header}, nil
}

// transportError classifies a failure to get a response: our deadline, the
// caller's cancellation, or the network.
func transportError(ctx context.Context, op string, timeout time.Duration, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return mcpgate.WrapError(mcpgate.EUnavailable, err, fmt.Sprintf(
			"E2B did not answer %s within %s; it may be overloaded, try again in a minute", op, timeout))
	case errors.Is(ctx.Err(), context.Canceled):
		return mcpgate.WrapError(mcpgate.EUnavailable, err, op+" was cancelled before E2B answered")
	default:
		// The cause is a *url.Error holding the URL, which carries no key
		// (the key travels in a header).
		return mcpgate.WrapError(mcpgate.EUnavailable, err, fmt.Sprintf(
			"could not reach E2B for %s (network error); try again later", op))
	}
}

// pageQuery adds limit and nextToken to q.
func pageQuery(q url.Values, limit int, nextToken string) url.Values {
	if q == nil {
		q = url.Values{}
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if nextToken != "" {
		q.Set("nextToken", nextToken)
	}
	return q
}

// sandboxPath returns /sandboxes/{id}{suffix} with id escaped. Tools validate
// ids with a pattern first; escaping guards the client's other callers.
func sandboxPath(id, suffix string) string {
	return "/sandboxes/" + url.PathEscape(id) + suffix
}

func sandboxWhat(id string) string { return fmt.Sprintf("sandbox %q", id) }
