package app

import (
	"context"
	"time"

	"github.com/mcpgate/mcpgate/web"
)

// CallsPerHourFrom maps store.DB.AuditHourlyFrom to the dashboard's type: the
// audit page's chart counts the calls of the source its table shows.
func (d webData) CallsPerHourFrom(ctx context.Context, workspaceID, actorID, source string, since time.Time) ([]web.HourCount, error) {
	buckets, err := d.DB.AuditHourlyFrom(ctx, workspaceID, actorID, source, since)
	if err != nil {
		return nil, err
	}
	out := make([]web.HourCount, len(buckets))
	for i, b := range buckets {
		out[i] = web.HourCount{Hour: b.Hour, Calls: b.Calls, Errors: b.Errors}
	}
	return out, nil
}
