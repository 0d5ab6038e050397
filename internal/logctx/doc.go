// Package logctx joins log lines to the request they were written for. Its
// Handler wraps the slog.Handler that cmd builds and adds the request id
// that api's requestLog middleware puts in the request's context
// (mcpgate.RequestIDFromContext) to every record logged with that context:
// log.ErrorContext(ctx, ...) in any layer carries request_id without the
// layer knowing about it.
//
// Lines logged without a context (log.Error) or with one that carries no
// request id (background work) are passed through unchanged.
//
// Imports from this module: mcpgate.
package logctx
