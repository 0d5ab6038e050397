package trustcache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/trustcache"
)

// fixedTrust answers every entry the same way.
type fixedTrust struct{ fresh, stale, skip bool }

func (t fixedTrust) Fresh(time.Time) bool      { return t.fresh }
func (t fixedTrust) Stale(time.Time) bool      { return t.stale }
func (t fixedTrust) SkipReload(time.Time) bool { return t.skip }
func (fixedTrust) Failed()                     {}

var (
	errDown     = errors.New("connection refused")
	errNotFound = mcpgate.Errorf(mcpgate.ENotFound, "gone")
)

func TestCache_Get(t *testing.T) {
	tests := []struct {
		name    string
		trust   fixedTrust
		reload  error // what the second load answers
		want    string
		wantErr error
	}{
		{name: "fresh entry is used", trust: fixedTrust{fresh: true}, reload: errDown, want: "v1"},
		{name: "reload skipped after a failure", trust: fixedTrust{skip: true}, reload: errDown, want: "v1"},
		{name: "due entry is reloaded", reload: nil, want: "v2"},
		{name: "stale entry stands in while the database is away", trust: fixedTrust{stale: true}, reload: errDown, want: "v1"},
		{name: "too old to stand in", reload: errDown, wantErr: errDown},
		{name: "not found is never covered", trust: fixedTrust{stale: true}, reload: errNotFound, wantErr: errNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := trustcache.New[string](trustcache.Options{Trust: tt.trust})
			ctx := context.Background()
			if _, err := c.Get(ctx, "k", func(context.Context) (string, error) { return "v1", nil }); err != nil {
				t.Fatalf("first Get() err = %v", err)
			}
			got, err := c.Get(ctx, "k", func(context.Context) (string, error) {
				if tt.reload != nil {
					return "", tt.reload
				}
				return "v2", nil
			})
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("Get() = %q, %v, want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// An invalidation between a load and its store keeps what the load read
// out of the cache: it may predate the change the invalidation announced.
func TestCache_InvalidationDuringLoadWins(t *testing.T) {
	var c *trustcache.Cache[string]
	c = trustcache.New[string](trustcache.Options{Trust: fixedTrust{fresh: true},
		BeforeStore: func() { c.Invalidate(func(string) bool { return true }) }})
	ctx := context.Background()
	loads := 0
	load := func(context.Context) (string, error) { loads++; return "v", nil }
	for range 2 {
		if _, err := c.Get(ctx, "k", load); err != nil {
			t.Fatal(err)
		}
	}
	if loads != 2 {
		t.Fatalf("loads = %d, want 2 (the first load must not have been kept)", loads)
	}
}
