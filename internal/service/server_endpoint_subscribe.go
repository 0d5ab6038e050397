package service

import (
	"context"
	"errors"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/upstream"
)

var _ mcpgate.ResourceSubscriptions = (*Endpoints)(nil)

// OpenResourceSubscriber implements mcpgate.ResourceSubscriptions: a
// session of its own with the workspace's server (upstream.Subscriber,
// outside the pool), opened with the workspace's credential (or the
// caller's OAuth grant) for the caller alone; the endpoint holds one per
// person and server while any of that person's streams wants a URI.
func (e *Endpoints) OpenResourceSubscriber(ctx context.Context, a *mcpgate.Actor, name string, updated func(uri string)) (mcpgate.ResourceSubscriber, error) {
	en, err := e.server(ctx, a, name)
	if err != nil {
		return nil, err
	}
	if e.servers.pool == nil {
		return nil, mcpgate.Errorf(mcpgate.EUnavailable, "this gateway cannot reach upstream servers")
	}
	headers, err := en.headers.Open(ctx, e.servers.keyring, a.WorkspaceID)
	if err != nil {
		return nil, err
	}
	var sub *upstream.Subscriber
	err = e.servers.creds.Do(ctx, a, name, upstream.Target{URL: en.row.URL, Headers: headers}, func(t upstream.Target) error {
		var err error
		sub, err = e.servers.pool.OpenSubscriber(ctx, t, updated)
		return err
	})
	if e.servers.health.Outcome(ctx, a.WorkspaceID, name, err, ctx.Err() != nil) {
		e.servers.changed(a.WorkspaceID)
	}
	if err != nil {
		return nil, subscriptionError(err)
	}
	if !sub.Subscribes() {
		_ = sub.Close()
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "the upstream server %s does not support resource subscriptions", name)
	}
	return subscriber{sub}, nil
}

// subscriber is an upstream.Subscriber with the service's errors.
type subscriber struct{ s *upstream.Subscriber }

func (s subscriber) Subscribe(ctx context.Context, uri string) error {
	return subscriptionError(s.s.Subscribe(ctx, uri))
}

func (s subscriber) Unsubscribe(ctx context.Context, uri string) error {
	return subscriptionError(s.s.Unsubscribe(ctx, uri))
}

func (s subscriber) Close() error { return s.s.Close() }

func (s subscriber) Done() <-chan struct{} { return s.s.Done() }

// subscriptionError is the upstream's JSON-RPC error as an
// *mcpgate.UpstreamRPCError (relayed as it came, as a relay's), anything
// else as it is (the hop's errors name no credential).
func subscriptionError(err error) error {
	var rpcErr *upstream.RPCError
	if errors.As(err, &rpcErr) {
		return &mcpgate.UpstreamRPCError{Code: rpcErr.Code, Message: rpcErr.Message, Data: rpcErr.Data}
	}
	return err
}
