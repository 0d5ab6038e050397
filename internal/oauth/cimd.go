package oauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/netguard"
)

// CIMDOptions configure how client ID metadata documents are fetched.
type CIMDOptions struct {
	// Timeout bounds one fetch (default 5 s).
	Timeout time.Duration
	// MaxBytes caps a document (default 64 KiB).
	MaxBytes int64
	// CacheTTL is how long a fetched document is used before it is
	// fetched again (default 1 hour).
	CacheTTL time.Duration
	// AllowAddr, for tests only, lets the fetcher connect to an address
	// the policy refuses (a local TLS server on 127.0.0.1).
	AllowAddr func(netip.Addr) bool
	// RootCAs, for tests only, replaces the system's trusted roots.
	RootCAs *x509.CertPool
}

// isCIMDClientID reports whether a client_id is a metadata document's URL:
// https with a path (the MCP spec's shape of a URL client id).
func isCIMDClientID(id string) bool {
	u, err := url.Parse(id)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.Path != "" && u.Path != "/" &&
		u.User == nil && u.Fragment == "" && len(id) <= 2000
}

type cimdFetcher struct {
	opts   CIMDOptions
	client *http.Client
	// pending holds documents fetched for a sign-in not yet consented to.
	pending *pendingClients
}

// pendingTTL is how long a fetched, unconsented document is reused: the
// time from the authorization request to the consent.
const pendingTTL = 10 * time.Minute

// maxPending bounds the unconsented documents held in memory.
const maxPending = 256

// pendingClients is a small in-memory cache of fetched documents, so that
// the consent's POST does not fetch again what its GET fetched.
type pendingClients struct {
	mu      sync.Mutex
	clients map[string]pendingClient
}

type pendingClient struct {
	client  mcpgate.OAuthClient
	fetched time.Time
}

func (p *pendingClients) get(id string, now time.Time) *mcpgate.OAuthClient {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.clients[id]
	if !ok || now.Sub(e.fetched) >= pendingTTL {
		return nil
	}
	c := e.client
	return &c
}

func (p *pendingClients) put(c *mcpgate.OAuthClient, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, e := range p.clients {
		if now.Sub(e.fetched) >= pendingTTL {
			delete(p.clients, id)
		}
	}
	if len(p.clients) >= maxPending {
		return // full of live sign-ins: the next one fetches again
	}
	p.clients[c.ID] = pendingClient{client: *c, fetched: now}
}

func newCIMDFetcher(o CIMDOptions) *cimdFetcher {
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = 64 << 10
	}
	if o.CacheTTL == 0 {
		o.CacheTTL = time.Hour
	}
	allow := func(a netip.Addr) bool { return netguard.Public(a) && !netguard.Own(a) }
	if o.AllowAddr != nil {
		test := o.AllowAddr
		allow = func(a netip.Addr) bool { return (netguard.Public(a) && !netguard.Own(a)) || test(a) }
	}
	// The check runs on the address actually dialled, after DNS.
	dialer := &net.Dialer{Timeout: o.Timeout, Control: netguard.Control(allow)}
	tr := &http.Transport{DialContext: dialer.DialContext, TLSHandshakeTimeout: o.Timeout,
		ResponseHeaderTimeout: o.Timeout, MaxIdleConns: 10, IdleConnTimeout: 30 * time.Second,
		TLSClientConfig: &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12}, Proxy: nil}
	return &cimdFetcher{opts: o, pending: &pendingClients{clients: map[string]pendingClient{}},
		client: &http.Client{Transport: tr, Timeout: o.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return errNoRedirects }}}
}

// errNoRedirects stops the client at a redirect: a document must be served
// at its own URL, and a redirect could lead anywhere.
var errNoRedirects = errors.New("redirects are not followed")

// errAddrRefused is the dialer's refusal of an inner address.
var errAddrRefused = netguard.ErrRefused

// fetchError is a refused metadata document: Reason is safe to show the
// person (it never names an address the gateway resolved or reached, which
// would let anyone map the gateway's network); Err is for the log.
type fetchError struct {
	Reason string
	Err    error
}

func (e *fetchError) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

// Unwrap returns the underlying error.
func (e *fetchError) Unwrap() error { return e.Err }

func refuse(reason string) error { return &fetchError{Reason: reason} }

// fetch gets and checks a client ID metadata document: an https URL, no
// redirects, a size cap, JSON whose client_id is the URL itself.
func (f *cimdFetcher) fetch(ctx context.Context, id string) (*oauthex.ClientRegistrationMetadata, error) {
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return nil, refuse("its URL is not valid")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, errAddrRefused):
			return nil, &fetchError{Reason: "its host is on a private, special-use or this gateway's own address", Err: err}
		case errors.Is(err, errNoRedirects):
			return nil, &fetchError{Reason: "it redirects, and redirects are not followed", Err: err}
		}
		return nil, &fetchError{Reason: "it could not be fetched", Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, refuse(fmt.Sprintf("its URL answered HTTP %d", resp.StatusCode))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.opts.MaxBytes+1))
	if err != nil {
		return nil, &fetchError{Reason: "it could not be read", Err: err}
	}
	if int64(len(body)) > f.opts.MaxBytes {
		return nil, refuse(fmt.Sprintf("it is larger than %d KiB", f.opts.MaxBytes>>10))
	}
	var doc struct {
		oauthex.ClientRegistrationMetadata
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, refuse("it is not a JSON document")
	}
	if doc.ClientID != id {
		return nil, refuse("its client_id is not its own URL")
	}
	if doc.ClientSecret != "" {
		return nil, refuse("it carries a client secret, which a metadata document must not")
	}
	if m := doc.TokenEndpointAuthMethod; m != "" && m != "none" {
		return nil, refuse("only public clients (token_endpoint_auth_method none) are supported")
	}
	return &doc.ClientRegistrationMetadata, nil
}
