package upstream

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Subscriber is a session with one upstream held open for resource
// subscriptions: the pool's sessions serve one call or relay at a time
// and open no standalone stream (DisableStandaloneSSE), so they never
// hear notifications/resources/updated, which an upstream before
// 2026-07-28 sends on the standalone stream and a 2026-07-28 one on the
// subscriptions/listen stream of each subscription (go-sdk's client opens
// one per URI). A Subscriber is neither pooled nor shared: its owner
// (the server endpoint's subscriptions, one per person and server)
// subscribes and unsubscribes URIs on it, and closes it when none is left.
//
// What leaves for the upstream goes through the same hop as a call (the
// network policy, the target's credential headers only, the caps of
// hopTransport: a stream reads 64 KiB at most, after which go-sdk's
// client opens it again).
type Subscriber struct {
	cs        *mcp.ClientSession
	done      chan struct{} // closed when the session ends
	closeIdle func()
	redact    redactor
	lim       Limits
}

// OpenSubscriber connects a Subscriber to target, within ConnectTimeout;
// updated is told the URI of each notifications/resources/updated the
// upstream sends on it.
func (p *Pool[K]) OpenSubscriber(ctx context.Context, target Target, updated func(uri string)) (*Subscriber, error) {
	ctx = withoutValues(ctx)
	h, err := p.hop(target)
	if err != nil {
		return nil, err
	}
	r, closeIdle := h.redact, h.closeIdle
	tr := &mcp.StreamableClientTransport{Endpoint: h.endpoint, HTTPClient: h.client, MaxEventSize: int(p.limits.MaxAnswerBytes) + 1}
	mc := mcp.NewClient(&mcp.Implementation{Name: p.opts.ClientName, Version: p.opts.ClientVersion},
		&mcp.ClientOptions{Logger: p.opts.Logger, Capabilities: &mcp.ClientCapabilities{},
			ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
				if req.Params != nil && req.Params.URI != "" {
					updated(req.Params.URI)
				}
			}})
	cctx, cancel := context.WithTimeout(ctx, p.opts.ConnectTimeout)
	defer cancel()
	vals := &requestValues{probe: &probe{}}
	cs, err := mc.Connect(withRequestValues(cctx, vals), tr, p.sessionOptions())
	if err != nil {
		closeIdle()
		return nil, classify(err, vals.probe, r)
	}
	s := &Subscriber{cs: cs, done: make(chan struct{}), closeIdle: closeIdle, redact: r, lim: p.limits}
	go func() {
		// go-sdk's client ends the session when the upstream no longer
		// knows it (its standalone stream answered 404) or the connection
		// is closed.
		_ = cs.Wait()
		close(s.done)
	}()
	return s, nil
}

// Done is closed when the session has ended, closed here or by the
// upstream.
func (s *Subscriber) Done() <-chan struct{} { return s.done }

// Subscribes reports whether the upstream declares resources.subscribe.
func (s *Subscriber) Subscribes() bool {
	init := s.cs.InitializeResult()
	return init != nil && init.Capabilities != nil && init.Capabilities.Resources != nil && init.Capabilities.Resources.Subscribe
}

// Subscribe asks the upstream for updates of uri, within the call timeout.
func (s *Subscriber) Subscribe(ctx context.Context, uri string) error {
	ctx, cancel := context.WithTimeout(withoutValues(ctx), s.lim.IdleTimeout)
	defer cancel()
	return s.answer(s.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}))
}

// Unsubscribe ends the updates of uri.
func (s *Subscriber) Unsubscribe(ctx context.Context, uri string) error {
	ctx, cancel := context.WithTimeout(withoutValues(ctx), s.lim.IdleTimeout)
	defer cancel()
	return s.answer(s.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}))
}

// answer turns go-sdk's error into the package's: the upstream's JSON-RPC
// error as *RPCError, anything else an *Error; both redacted.
func (s *Subscriber) answer(err error) error {
	if err == nil {
		return nil
	}
	var w *jsonrpc.Error
	if errors.As(err, &w) {
		return s.redact.rpc(w)
	}
	return s.redact.newError(KindUnreachable, err, "the upstream server did not answer the subscription")
}

// Close ends the session (and with it every subscription on it).
func (s *Subscriber) Close() error {
	err := s.cs.Close()
	s.closeIdle()
	return err
}
