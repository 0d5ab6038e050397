package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
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
	"sync"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/netguard"
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

// Sender delivers from the Queue in the background.
type Sender struct {
	opts   Options
	public *http.Client // for https URLs: public addresses and the private networks
	inner  *http.Client // for http URLs: the private networks only
	owner  string       // this sender's name on its claims

	wake chan struct{}
	// hard ends the attempts under way when Close's deadline passes.
	hard     context.Context
	hardStop context.CancelFunc
	stopLoop context.CancelFunc
	loopDone chan struct{}

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
	retries  []time.Time // when the retries this sender scheduled are due
}

// errNoRedirects stops the client at a redirect: a redirect could lead
// anywhere, past the URL rule.
var errNoRedirects = errors.New("redirects are not followed")

// ErrClosed is RunDue's answer after Close.
var ErrClosed = errors.New("webhook sender closed")

// New returns a running sender, which looks for due deliveries at once;
// Close stops it.
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
	if opts.Poll == 0 {
		opts.Poll = 30 * time.Second
	}
	if opts.Lease <= 0 {
		opts.Lease = opts.Timeout + 30*time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	s := &Sender{opts: opts, owner: newOwner(), wake: make(chan struct{}, 1), loopDone: make(chan struct{})}
	s.public = s.client(s.allowed(true))
	s.inner = s.client(s.allowed(false))
	s.hard, s.hardStop = context.WithCancel(context.Background())
	loop, stop := context.WithCancel(context.Background())
	s.stopLoop = stop
	if opts.Queue != nil && opts.Poll > 0 {
		go s.loop(loop)
	} else {
		close(s.loopDone)
	}
	return s
}

// newOwner names a sender on its claims: random, so that a restarted
// process never mistakes its predecessor's claims for its own.
func newOwner() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
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
func (s *Sender) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Close stops looking for deliveries and waits for the attempts under way
// until ctx ends; those still running then are cut short and released, due
// at once for the next sender, which sends them again (the receiver may see
// such a delivery twice: it dedupes by X-Mcpgate-Delivery). What waits for a
// later attempt stays in the Queue.
func (s *Sender) Close(ctx context.Context) {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stopLoop()
	// The loop may be in an attempt: it is waited for with the others,
	// under the same deadline (closed is set, so nothing new starts).
	done := make(chan struct{})
	go func() { s.inflight.Wait(); <-s.loopDone; close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.hardStop()
		<-done // the cut attempts release their claims, each within a few seconds
	}
	s.hardStop()
}

// loop runs the due deliveries at start, on Wake, when a retry it
// scheduled is due and every Poll.
func (s *Sender) loop(ctx context.Context) {
	defer close(s.loopDone)
	for {
		for {
			n, err := s.RunDue(ctx)
			if err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed) {
				s.opts.Logger.Warn("webhook deliveries not claimed", "err", err)
			}
			if err != nil || n < s.opts.Workers {
				break
			}
		}
		t := time.NewTimer(s.nextWait())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// nextWait is how long the loop sleeps: until the soonest retry this
// sender scheduled, at most Poll. Retries already due are forgotten (the
// run that follows claims them, or another sender did).
func (s *Sender) nextWait() time.Duration {
	now := s.opts.Now()
	wait := s.opts.Poll
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.retries[:0]
	for _, at := range s.retries {
		if !at.After(now) {
			wait = 0
			continue
		}
		kept = append(kept, at)
		wait = min(wait, at.Sub(now))
	}
	s.retries = kept
	return wait
}

// RunDue claims the deliveries due now (up to Workers), tries each once,
// records the outcomes and returns how many it tried. The background loop
// calls it; tests call it on a sender without one.
func (s *Sender) RunDue(ctx context.Context) (int, error) {
	if s.opts.Queue == nil {
		return 0, nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, ErrClosed
	}
	s.inflight.Add(1)
	s.mu.Unlock()
	defer s.inflight.Done()
	// A claim still waiting on the database when Close's deadline passes
	// gives up: Close waits for nothing unbounded.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.hard, cancel)()
	ds, err := s.opts.Queue.Claim(ctx, s.owner, s.opts.Now(), s.opts.Lease, s.opts.Workers)
	if err != nil {
		return 0, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Add(1)
		go func() { defer wg.Done(); s.try(d) }()
	}
	wg.Wait()
	return len(ds), nil
}

// try posts d once and records the outcome: delivered (2xx), refused for
// good (a 4xx other than 408 and 429: retrying will not help) or out of
// attempts is final; otherwise the next attempt is due after Backoff,
// doubled for each attempt made. An attempt cut short by Close is released.
func (s *Sender) try(d Delivery) {
	status, err := s.post(s.hard, d)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.hard.Err() != nil {
		if rerr := s.opts.Queue.Release(ctx, s.owner, d.ID, s.opts.Now()); rerr != nil {
			s.opts.Logger.Warn("webhook delivery not released; its claim will expire", "delivery", d.ID, "err", rerr)
		}
		return
	}
	final := err == nil || d.Attempt >= s.opts.Attempts || permanent(status)
	r := Result{ID: d.ID, Ref: d.Ref, Event: d.Event, Attempts: d.Attempt, Status: status, Err: err, Final: final}
	var next time.Time
	if !final {
		next = s.opts.Now().Add(s.opts.Backoff << (d.Attempt - 1))
	}
	held, rerr := s.opts.Queue.Record(ctx, s.owner, r, next)
	switch {
	case rerr != nil:
		// The claim expires and another attempt follows: at least once.
		s.opts.Logger.Error("webhook attempt not recorded", "event", d.Event, "delivery", d.ID, "attempt", d.Attempt, "err", rerr)
	case !held:
		s.opts.Logger.Warn("webhook claim expired during the attempt; another sender took it over", "delivery", d.ID)
	case !final:
		s.opts.Logger.Warn("webhook not delivered; retrying", "event", d.Event, "delivery", d.ID, "attempt", d.Attempt, "status", status)
		s.mu.Lock()
		s.retries = append(s.retries, next)
		s.mu.Unlock()
	default:
		s.report(r)
	}
}

func (s *Sender) report(r Result) {
	if r.Final && r.Err != nil {
		s.opts.Logger.Error("webhook not delivered", "event", r.Event, "delivery", r.ID, "attempts", r.Attempts, "status", r.Status, "err", r.Err)
	} else if r.Final {
		s.opts.Logger.Info("webhook delivered", "event", r.Event, "delivery", r.ID, "attempts", r.Attempts)
	}
}

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
