package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/netguard"
	"github.com/mcpgate/mcpgate/internal/retryqueue"
)

// The headers of a delivery: a public contract, since receivers check the
// signature and de-duplicate by delivery id.
const (
	HeaderEvent     = "X-Mcpgate-Event"
	HeaderDelivery  = "X-Mcpgate-Delivery"
	HeaderSignature = "X-Mcpgate-Signature"
)

// Sign returns the X-Mcpgate-Signature value of body under secret:
// "sha256=" and the hex HMAC-SHA256.
func Sign(secret mcpgate.Secret, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret.Reveal()))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Delivery is one POST to send. Secret signs Body and is never logged or
// reported back.
type Delivery struct {
	// ID is the X-Mcpgate-Delivery header, and Ref the caller's own
	// reference; both are given back in the Result.
	ID     string
	Ref    string
	Event  string
	URL    string
	Body   []byte
	Secret mcpgate.Secret
}

// Result is the outcome of one attempt. Final is the last attempt
// (delivered, refused for good, or out of attempts).
type Result struct {
	ID, Ref, Event string
	Attempts       int
	Status         int
	// Err says why the attempt failed, in words safe to show an admin: no
	// address the gateway resolved, no secret.
	Err   error
	Final bool
}

// Options configure a Sender.
type Options struct {
	// PrivateNetworks are UPSTREAM_PRIVATE_NETWORKS: inner networks a URL
	// may point into (also over plain http).
	PrivateNetworks []netip.Prefix
	// Timeout bounds one attempt (default 10 s).
	Timeout time.Duration
	// Attempts is how many times a delivery is tried (default 5), waiting
	// Backoff (default 2 s) doubled after each failure.
	Attempts int
	Backoff  time.Duration
	// Workers send at once (default 4), so that one slow receiver does not
	// hold up the others.
	Workers int
	Logger  *slog.Logger
	// Done is told the outcome of every attempt.
	Done func(Result)
	// Resolver, when set, replaces the system's (tests).
	Resolver *net.Resolver
}

// Sender delivers from a queue in the background.
type Sender struct {
	opts   Options
	public *http.Client // for https URLs: public addresses and the private networks
	inner  *http.Client // for http URLs: the private networks only
	queue  *retryqueue.Queue[Delivery]
}

// ErrQueueFull is Send's answer when too many deliveries are waiting.
var ErrQueueFull = errors.New("webhook queue full")

// errNoRedirects stops the client at a redirect: a redirect could lead
// anywhere, past the URL rule.
var errNoRedirects = errors.New("redirects are not followed")

// New returns a running sender; Close stops it.
func New(opts Options) *Sender {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 5
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 2 * time.Second
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	s := &Sender{opts: opts}
	s.public = s.client(s.allowed(true))
	s.inner = s.client(s.allowed(false))
	s.queue = retryqueue.New(retryqueue.Options{Workers: opts.Workers, Attempts: opts.Attempts, Backoff: opts.Backoff}, s.try)
	return s
}

// allowed is the address rule: a private network named by the operator,
// or (for https) a public address that is not this host's own.
func (s *Sender) allowed(https bool) func(netip.Addr) bool {
	return func(a netip.Addr) bool {
		if netguard.Contains(s.opts.PrivateNetworks, a) {
			return true
		}
		return https && netguard.Public(a) && !netguard.Own(a)
	}
}

// client builds the HTTP client whose every dial is checked by allow on
// the address it connects to (after DNS), without a proxy or redirects.
func (s *Sender) client(allow func(netip.Addr) bool) *http.Client {
	dialer := &net.Dialer{Timeout: s.opts.Timeout, Resolver: s.opts.Resolver, Control: netguard.Control(allow)}
	tr := &http.Transport{DialContext: dialer.DialContext, Proxy: nil, TLSHandshakeTimeout: s.opts.Timeout,
		ResponseHeaderTimeout: s.opts.Timeout, MaxIdleConns: 10, IdleConnTimeout: 30 * time.Second}
	return &http.Client{Transport: tr, Timeout: s.opts.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return errNoRedirects }}
}

var errURL = mcpgate.Errorf(mcpgate.EInvalid, "webhook_url must be an https:// URL of a public server, "+
	"or an http(s):// URL in a network the operator allowed in UPSTREAM_PRIVATE_NETWORKS, without a user or password")

// CheckURL refuses a URL the sender would not deliver to: not http(s), with
// credentials, or whose host resolves (now) to an address the rule
// refuses. Every dial is checked again, since a name may resolve elsewhere
// later. The refusal never names the addresses found.
func (s *Sender) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || len(raw) > 2048 {
		return errURL
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	host := u.Hostname()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = s.opts.Resolver.LookupNetIP(ctx, "ip", host); err != nil || len(addrs) == 0 {
		return mcpgate.Errorf(mcpgate.EInvalid, "webhook_url's host %q could not be resolved", host)
	}
	allow := s.allowed(u.Scheme == "https")
	for _, a := range addrs {
		if !allow(a) {
			return errURL
		}
	}
	return nil
}

// Send queues a delivery. It does not wait for the receiver.
func (s *Sender) Send(d Delivery) error {
	switch err := s.queue.Send(d); {
	case errors.Is(err, retryqueue.ErrFull):
		return ErrQueueFull
	case err != nil:
		return errors.New("webhook sender closed")
	}
	return nil
}

// Close stops the sender once what is queued has been tried (without more
// waiting between attempts), or when ctx ends.
func (s *Sender) Close(ctx context.Context) { s.queue.Close(ctx) }

// try posts d once for the queue, which retries it until it is accepted
// (2xx), refused for good (a 4xx other than 408 and 429: retrying will not
// help), or out of attempts.
func (s *Sender) try(d Delivery, n int, last bool) bool {
	status, err := s.post(d)
	final := err == nil || last || permanent(status)
	s.report(Result{ID: d.ID, Ref: d.Ref, Event: d.Event, Attempts: n, Status: status, Err: err, Final: final})
	if !final {
		s.opts.Logger.Warn("webhook not delivered; retrying", "event", d.Event, "delivery", d.ID, "attempt", n, "status", status)
	}
	return final
}

func (s *Sender) report(r Result) {
	if r.Final && r.Err != nil {
		s.opts.Logger.Error("webhook not delivered", "event", r.Event, "delivery", r.ID, "attempts", r.Attempts, "status", r.Status, "err", r.Err)
	} else if r.Final {
		s.opts.Logger.Info("webhook delivered", "event", r.Event, "delivery", r.ID, "attempts", r.Attempts)
	}
	if s.opts.Done != nil {
		s.opts.Done(r)
	}
}

func permanent(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}

// post sends d once. The error is in words an admin may see: the URL's
// resolved address, which would map the gateway's network for whoever set
// the URL, is left out.
func (s *Sender) post(d Delivery) (int, error) {
	c := s.inner
	if u, err := url.Parse(d.URL); err == nil && u.Scheme == "https" {
		c = s.public
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(d.Body))
	if err != nil {
		return 0, errors.New("the webhook URL is not valid")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "mcpgate-webhook")
	req.Header.Set(HeaderEvent, d.Event)
	req.Header.Set(HeaderDelivery, d.ID)
	req.Header.Set(HeaderSignature, Sign(d.Secret, d.Body))
	resp, err := c.Do(req)
	if err != nil {
		return 0, describe(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("the receiver answered %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// describe says why a POST did not get an answer.
func describe(err error) error {
	switch {
	case errors.Is(err, netguard.ErrRefused):
		return errors.New("the webhook URL leads to an address outside the allowed networks; nothing was sent")
	case errors.Is(err, errNoRedirects):
		return errors.New("the receiver answered with a redirect, which is not followed")
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return errors.New("the receiver did not answer in time")
	}
	return errors.New("the receiver could not be reached")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
