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
	"github.com/mcpgate/mcpgate/internal/outbox"
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

// Delivery is one attempt to send, as the Queue hands it out. Secret signs
// Body and is never logged, stored or reported back.
type Delivery struct {
	// ID is the X-Mcpgate-Delivery header, and Ref the caller's own
	// reference; both are given back in the Result.
	ID     string
	Ref    string
	Event  string
	URL    string
	Body   []byte
	Secret mcpgate.Secret
	// Attempt is the attempt about to be made, from 1.
	Attempt int
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

// Queue is where deliveries wait between attempts: rows every replica on
// the database shares, so that a delivery outlives the process that queued
// it. A sender claims the due ones for a lease, tries each once and records
// the outcome; a claim whose sender died expires, and another takes it.
type Queue interface {
	// Claim takes up to limit deliveries whose next attempt is due at now
	// and that no unexpired claim holds, for owner until now+lease, in one
	// statement (two senders never get the same attempt). The attempt about
	// to be made counts already (Delivery.Attempt).
	Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]Delivery, error)
	// Record stores an attempt's outcome and ends the claim: next is when
	// the next attempt is due (unused when r.Final). It reports false, and
	// records nothing, when owner no longer held the claim (it expired and
	// another sender took the delivery over).
	Record(ctx context.Context, owner string, r Result, next time.Time) (bool, error)
	// Release ends a claim without an attempt counted (the sender stopped
	// during it), the delivery due at now for any sender.
	Release(ctx context.Context, owner, id string, now time.Time) error
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
	// Queue holds the deliveries; nil: the sender only checks URLs.
	Queue Queue
	// Poll is how often the queue is looked at for due deliveries besides
	// at start, on Wake and when a retry this sender scheduled is due
	// (default 30 s). Negative: never in the background (tests call
	// RunDue).
	Poll time.Duration
	// Lease is how long a claim holds before another sender may take the
	// delivery over (default Timeout + 30 s: longer than an attempt).
	Lease time.Duration
	// Now is the clock the due times and leases are read on (default
	// time.Now); replicas on one database should agree on it to well
	// within Lease.
	Now func() time.Time
	// Resolver, when set, replaces the system's (tests).
	Resolver *net.Resolver
}

// Sender delivers from the Queue in the background, on an outbox runner
// (the claim loop the durable mails share).
type Sender struct {
	opts   Options
	public *http.Client // for https URLs: public addresses and the private networks
	inner  *http.Client // for http URLs: the private networks only
	run    *outbox.Runner[Delivery]
}

// errNoRedirects stops the client at a redirect: a redirect could lead
// anywhere, past the URL rule.
var errNoRedirects = errors.New("redirects are not followed")

// ErrClosed is RunDue's answer after Close.
var ErrClosed = outbox.ErrClosed

// New returns a running sender, which looks for due deliveries at once;
// Close stops it.
func New(opts Options) *Sender {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Poll == 0 {
		opts.Poll = 30 * time.Second
	}
	if opts.Lease <= 0 {
		opts.Lease = opts.Timeout + 30*time.Second
	}
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	s := &Sender{opts: opts}
	s.public = s.client(s.allowed(true))
	s.inner = s.client(s.allowed(false))
	poll := opts.Poll
	if opts.Queue == nil {
		poll = -1 // a sender without a queue only checks URLs
	}
	s.run = outbox.New(outbox.Options[Delivery]{Name: "webhook", Queue: queue{opts.Queue},
		Attempt:   func(ctx context.Context, c outbox.Claim[Delivery]) (int, error) { return s.post(ctx, c.Item) },
		Permanent: permanent, Attempts: opts.Attempts, Backoff: opts.Backoff, Workers: opts.Workers,
		Poll: poll, Lease: opts.Lease, Now: opts.Now, Logger: opts.Logger})
	return s
}

// queue is the Queue as the outbox runner asks for it.
type queue struct{ q Queue }

func (q queue) Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]outbox.Claim[Delivery], error) {
	if q.q == nil {
		return nil, nil
	}
	ds, err := q.q.Claim(ctx, owner, now, lease, limit)
	cs := make([]outbox.Claim[Delivery], len(ds))
	for i, d := range ds {
		cs[i] = outbox.Claim[Delivery]{ID: d.ID, Attempt: d.Attempt, Item: d}
	}
	return cs, err
}

func (q queue) Record(ctx context.Context, owner string, c outbox.Claim[Delivery], o outbox.Outcome, next time.Time) (bool, error) {
	return q.q.Record(ctx, owner, Result{ID: c.ID, Ref: c.Item.Ref, Event: c.Item.Event, Attempts: o.Attempts,
		Status: o.Status, Err: o.Err, Final: o.Final}, next)
}

func (q queue) Release(ctx context.Context, owner, id string, now time.Time) error {
	return q.q.Release(ctx, owner, id, now)
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

// Wake tells the sender that a delivery was queued: it claims it at once
// rather than at the next poll. It never waits.
func (s *Sender) Wake() { s.run.Wake() }

// Close stops looking for deliveries and waits for the attempts under way
// until ctx ends; those still running then are cut short and released, due
// at once for the next sender, which sends them again (the receiver may see
// such a delivery twice: it dedupes by X-Mcpgate-Delivery). What waits for a
// later attempt stays in the Queue.
func (s *Sender) Close(ctx context.Context) { s.run.Close(ctx) }

// RunDue claims the deliveries due now (up to Workers), tries each once,
// records the outcomes and returns how many it tried. The background loop
// calls it; tests call it on a sender without one.
func (s *Sender) RunDue(ctx context.Context) (int, error) {
	if s.opts.Queue == nil {
		return 0, nil
	}
	return s.run.RunDue(ctx)
}

// permanent: a 4xx other than 408 and 429 says retrying will not help.
func permanent(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}

// post sends d once. The error is in words an admin may see: the URL's
// resolved address, which would map the gateway's network for whoever set
// the URL, is left out.
func (s *Sender) post(ctx context.Context, d Delivery) (int, error) {
	c := s.inner
	if u, err := url.Parse(d.URL); err == nil && u.Scheme == "https" {
		c = s.public
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
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
