package limiter

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestBuckets_SharedAcrossReplicas measures what one key gets from N
// replicas that each enforce their share of its limit, against what is
// configured, on a hand-moved clock (so the numbers are exact and the same
// on every run). The client offers ten times the rate for a minute, either
// spread evenly by the load balancer or all to one replica.
//
// The bound the README states: together the replicas never allow more than the
// configured burst plus rate × time; spread evenly they allow that less at
// most two calls per replica (the burst's rounding, a token not yet whole);
// a client whose calls all reach one of N replicas gets 1/N of it.
func TestBuckets_SharedAcrossReplicas(t *testing.T) {
	const (
		limit  = 20 // calls/s, the default MCP_KEY_RATE
		burst  = 40 // the default MCP_KEY_BURST
		window = time.Minute
		every  = 5 * time.Millisecond // 200 calls/s offered
	)
	configured := burst + limit*int(window/time.Second)
	for _, n := range []int{1, 2, 3} {
		for _, spread := range []bool{true, false} {
			name := fmt.Sprintf("%d replicas, all on one", n)
			if spread {
				name = fmt.Sprintf("%d replicas, spread", n)
			}
			t.Run(name, func(t *testing.T) {
				start := time.Unix(1_700_000_000, 0)
				sets := make([]*Buckets, n)
				for i := range sets {
					sets[i] = New(Options{Rate: limit, Burst: burst, Replicas: func() int { return n }})
				}
				allowed := 0
				for i, now := 0, start; now.Before(start.Add(window)); i, now = i+1, now.Add(every) {
					target := 0
					if spread {
						target = i % n
					}
					if ok, _ := sets[target].Allow("key", now); ok {
						allowed++
					}
				}
				t.Logf("allowed %d of %d configured (%.1f%%)", allowed, configured, 100*float64(allowed)/float64(configured))
				if allowed > configured {
					t.Fatalf("allowed %d calls, more than the configured %d", allowed, configured)
				}
				// Per replica, at most one call lost to the burst's rounding
				// and one to the part of a token not yet whole at the end.
				want := configured - 2*n
				if !spread {
					want = configured/n - 2
				}
				if allowed < want {
					t.Fatalf("allowed %d calls, want at least %d", allowed, want)
				}
			})
		}
	}
}

// TestBuckets_Reshare: when the number of replicas changes, the buckets
// take the new share at once and keep what was spent: a replica joining
// mid-burst does not hand out a fresh burst.
func TestBuckets_Reshare(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	replicas := 1
	s := New(Options{Rate: rate.Limit(10), Burst: 30, Replicas: func() int { return replicas }})
	for range 30 {
		if ok, _ := s.Allow("k", now); !ok {
			t.Fatal("the first 30 calls of a burst of 30 were refused")
		}
	}
	if ok, _ := s.Allow("k", now); ok {
		t.Fatal("call 31 of a burst of 30 was allowed")
	}
	// Two more replicas: this one's share is a third.
	replicas = 3
	if ok, _ := s.Allow("k", now); ok {
		t.Fatal("two replicas joining gave an empty bucket new tokens")
	}
	lim := mustEntry(t, s, "k").lim
	if lim.Limit() != rate.Limit(10)/3 || lim.Burst() != 10 {
		t.Fatalf("with 3 replicas: limit %v burst %d, want 10/3 and 10", lim.Limit(), lim.Burst())
	}
	// Three seconds at 10/3 per second: ten calls, and no more.
	later := now.Add(3 * time.Second)
	got := 0
	for range 20 {
		if ok, _ := s.Allow("k", later); ok {
			got++
		}
	}
	if got != 10 {
		t.Fatalf("3 s after the replicas joined: %d calls allowed, want 10", got)
	}
	// A new bucket starts at the share too.
	replicas = 2
	if l := mustEntry(t, s, "new-key").lim; l.Limit() != 5 || l.Burst() != 15 {
		t.Fatalf("a new bucket with 2 replicas: limit %v burst %d, want 5 and 15", l.Limit(), l.Burst())
	}
}

// mustEntry returns the bucket of name, made at the set's share if new.
func mustEntry(t *testing.T, s *Buckets, name string) *entry {
	t.Helper()
	return s.get(name, time.Unix(1_700_000_000, 0))
}

// TestBuckets_Exhausted: Exhausted reads a bucket without spending it, and
// says how long until its next token.
func TestBuckets_Exhausted(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := New(Options{Rate: 1, Burst: 2})
	if empty, _ := s.Exhausted("a", now); empty {
		t.Fatal("Exhausted() of a name never used = true, want false")
	}
	for range 2 {
		if empty, _ := s.Exhausted("a", now); empty {
			t.Fatal("Exhausted() with tokens left = true, want false")
		}
		if ok, _ := s.Allow("a", now); !ok {
			t.Fatal("Allow() within the burst = false")
		}
	}
	empty, wait := s.Exhausted("a", now)
	if !empty || wait != time.Second {
		t.Fatalf("Exhausted() of a spent bucket = %v, %v; want true, 1s", empty, wait)
	}
	if ok, wait := s.Allow("a", now); ok || wait != time.Second {
		t.Fatalf("Allow() of a spent bucket = %v, %v; want false, 1s", ok, wait)
	}
	if empty, _ := s.Exhausted("a", now.Add(time.Second)); empty {
		t.Fatal("Exhausted() a second later = true, want a token back")
	}
}

// TestBuckets_Sweep: a bucket is kept while in use and for Idle after, so a
// spent one is not handed back full early, and dropped once idle longer.
func TestBuckets_Sweep(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := New(Options{Rate: rate.Every(48 * time.Hour), Burst: 1, Idle: 24 * time.Hour})
	if ok, _ := s.Allow("a", now); !ok {
		t.Fatal("first Allow() = false")
	}
	day := now.Add(24 * time.Hour)
	s.Sweep(day)
	if ok, _ := s.Allow("a", day); ok {
		t.Fatal("Allow() a day later = true: the spent bucket was swept within Idle and came back full")
	}
	s.Sweep(day.Add(24*time.Hour + time.Second))
	if _, ok := s.m.Load("a"); ok {
		t.Fatal("a bucket idle past Idle was kept")
	}
	if d := New(Options{}).opts.Idle; d != DefaultIdle {
		t.Fatalf("default Idle = %v, want %v", d, DefaultIdle)
	}
}
