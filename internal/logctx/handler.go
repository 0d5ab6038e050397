package logctx

import (
	"context"
	"log/slog"

	"github.com/mcpgate/mcpgate"
)

// Key is the attribute the request id is logged under.
const Key = "request_id"

// Handler adds the context's request id to each record as Key, at the top
// level, once: not when the record or the logger (With) already sets Key at
// the top level. It is safe for concurrent use when the wrapped handler is.
type Handler struct {
	inner slog.Handler
	// hasID reports whether WithAttrs set Key at the top level.
	hasID bool
	// Once a group is open, attributes added to a record land inside it.
	// To keep Key at the top level, base is the handler as it was before
	// the first WithGroup, and ops replay the later WithGroup and WithAttrs
	// calls on top of base.WithAttrs(Key). Both are nil until a group opens.
	base slog.Handler
	ops  []func(slog.Handler) slog.Handler
}

// New wraps h.
func New(h slog.Handler) *Handler { return &Handler{inner: h} }

// Enabled reports whether the wrapped handler handles records at level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// Handle adds the request id, when ctx carries one, and hands r on.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	id := mcpgate.RequestIDFromContext(ctx)
	if id == "" || h.hasID {
		return h.inner.Handle(ctx, r)
	}
	if h.base == nil {
		if recordHasKey(r) {
			return h.inner.Handle(ctx, r)
		}
		// Clone: r shares its attribute storage with the caller's copy.
		r = r.Clone()
		r.AddAttrs(slog.String(Key, id))
		return h.inner.Handle(ctx, r)
	}
	// A group is open, so the record's own attributes sit inside it and
	// cannot set the top-level Key. Rebuilding the chain costs a few
	// allocations per record; the gateway's loggers open no groups.
	inner := h.base.WithAttrs([]slog.Attr{slog.String(Key, id)})
	for _, op := range h.ops {
		inner = op(inner)
	}
	return inner.Handle(ctx, r)
}

// WithAttrs returns a Handler whose records carry attrs.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	n := h.clone()
	n.inner = h.inner.WithAttrs(attrs)
	if h.base == nil {
		n.hasID = h.hasID || hasKey(attrs)
	} else {
		n.ops = append(n.ops, func(x slog.Handler) slog.Handler { return x.WithAttrs(attrs) })
	}
	return n
}

// WithGroup returns a Handler that puts later attributes in group name.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := h.clone()
	if h.base == nil {
		n.base = h.inner
	}
	n.inner = h.inner.WithGroup(name)
	n.ops = append(n.ops, func(x slog.Handler) slog.Handler { return x.WithGroup(name) })
	return n
}

// clone copies h with ops in a slice of its own, so that two loggers derived
// from one never append into each other's ops.
func (h *Handler) clone() *Handler {
	n := *h
	n.ops = append([]func(slog.Handler) slog.Handler(nil), h.ops...)
	return &n
}

func hasKey(attrs []slog.Attr) bool {
	for _, a := range attrs {
		if a.Key == Key {
			return true
		}
	}
	return false
}

func recordHasKey(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == Key
		return !found
	})
	return found
}
