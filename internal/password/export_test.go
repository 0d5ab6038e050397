package password

import "context"

// LimiterDo runs fn under l, as Hash and Verify do.
func LimiterDo(l *Limiter, ctx context.Context, memKiB uint32, fn func()) error {
	return l.do(ctx, memKiB, fn)
}
