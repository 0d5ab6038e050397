package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/webhook"
)

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// receiver is a local webhook receiver that checks each POST's signature
// itself and answers the statuses it is given, one per request.
type receiver struct {
	mu       sync.Mutex
	statuses []int
	got      []http.Header
	bodies   []string
	badSig   int
}

func (rv *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m := hmac.New(sha256.New, []byte("whsec-test"))
	m.Write(body)
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if r.Header.Get(webhook.HeaderSignature) != "sha256="+hex.EncodeToString(m.Sum(nil)) {
		rv.badSig++
	}
	rv.got = append(rv.got, r.Header.Clone())
	rv.bodies = append(rv.bodies, string(body))
	status := http.StatusNoContent
	if len(rv.statuses) > 0 {
		status, rv.statuses = rv.statuses[0], rv.statuses[1:]
	}
	w.WriteHeader(status)
}

// memQueue is a Queue in memory (the store's, over Postgres, is tested in
// internal/service): it hands out what is due and reports every outcome.
type memQueue struct {
	mu       sync.Mutex
	claimed  map[string]webhook.Delivery
	released []string
	waiting  []webhook.Delivery
	due      []time.Time
	results  chan webhook.Result
}

func (q *memQueue) add(d webhook.Delivery) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waiting, q.due = append(q.waiting, d), append(q.due, time.Now())
}

func (q *memQueue) Claim(_ context.Context, _ string, now time.Time, _ time.Duration, limit int) ([]webhook.Delivery, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []webhook.Delivery
	for i := 0; i < len(q.waiting) && len(out) < limit; {
		if q.due[i].After(now) {
			i++
			continue
		}
		d := q.waiting[i]
		d.Attempt++
		out = append(out, d)
		q.claimed[d.ID] = d
		q.waiting, q.due = append(q.waiting[:i], q.waiting[i+1:]...), append(q.due[:i], q.due[i+1:]...)
	}
	return out, nil
}

func (q *memQueue) Record(_ context.Context, _ string, r webhook.Result, next time.Time) (bool, error) {
	if !r.Final {
		q.mu.Lock()
		q.waiting = append(q.waiting, q.claimed[r.ID])
		q.due = append(q.due, next)
		q.mu.Unlock()
	}
	q.results <- r
	return true, nil
}

func (q *memQueue) Release(_ context.Context, _ string, id string, _ time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.released = append(q.released, id)
	return nil
}

func newSender(t *testing.T, nets []netip.Prefix) (*sender, <-chan webhook.Result) {
	t.Helper()
	q := &memQueue{results: make(chan webhook.Result, 16), claimed: map[string]webhook.Delivery{}}
	s := webhook.New(webhook.Options{PrivateNetworks: nets, Backoff: time.Millisecond, Attempts: 3, Timeout: 5 * time.Second, Queue: q})
	t.Cleanup(func() { s.Close(context.Background()) })
	return &sender{Sender: s, q: q}, q.results
}

// sender queues into its memQueue and wakes the Sender, as the services
// do with the database.
type sender struct {
	*webhook.Sender
	q *memQueue
}

func (s *sender) Send(d webhook.Delivery) error {
	s.q.add(d)
	s.Wake()
	return nil
}

func final(t *testing.T, results <-chan webhook.Result) []webhook.Result {
	t.Helper()
	var all []webhook.Result
	for {
		select {
		case r := <-results:
			all = append(all, r)
			if r.Final {
				return all
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no final result; got %+v", all)
		}
	}
}

// A delivery is signed, carries its event and id, and is retried after a
// 500 until the receiver takes it.
func TestSender_SignsAndRetries(t *testing.T) {
	rv := &receiver{statuses: []int{500}}
	ts := httptest.NewServer(rv)
	defer ts.Close()
	s, results := newSender(t, loopback)
	if err := s.Send(webhook.Delivery{ID: "d1", Event: "approval.requested", URL: ts.URL + "/hook", Body: []byte(`{"event":"approval.requested"}`),
		Secret: mcpgate.Secret("whsec-test")}); err != nil {
		t.Fatal(err)
	}
	all := final(t, results)
	last := all[len(all)-1]
	if len(all) != 2 || last.Err != nil || last.Attempts != 2 || all[0].Status != 500 {
		t.Fatalf("results = %+v, want a 500 then a delivery", all)
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if rv.badSig != 0 || len(rv.got) != 2 {
		t.Fatalf("bad signatures %d of %d", rv.badSig, len(rv.got))
	}
	if h := rv.got[1]; h.Get(webhook.HeaderEvent) != "approval.requested" || h.Get(webhook.HeaderDelivery) != "d1" {
		t.Errorf("headers = %v", h)
	}
}

// A 4xx other than 408/429 is not retried; a redirect is not followed.
func TestSender_NoRetryOn4xxNoRedirects(t *testing.T) {
	target := &receiver{}
	tts := httptest.NewServer(target)
	defer tts.Close()
	mux := http.NewServeMux()
	mux.Handle("/gone", &receiver{statuses: []int{410}})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, tts.URL, http.StatusTemporaryRedirect)
	})
	ts := httptest.NewServer(mux)
	defer ts.Close()
	s, results := newSender(t, loopback)
	_ = s.Send(webhook.Delivery{ID: "d1", URL: ts.URL + "/gone", Body: []byte("{}"), Secret: "whsec-test"})
	if all := final(t, results); len(all) != 1 || all[0].Status != 410 {
		t.Errorf("410: results = %+v, want one final attempt", all)
	}
	_ = s.Send(webhook.Delivery{ID: "d2", URL: ts.URL + "/moved", Body: []byte("{}"), Secret: "whsec-test"})
	all := final(t, results)
	if last := all[len(all)-1]; last.Err == nil || !strings.Contains(last.Err.Error(), "redirect") {
		t.Errorf("redirect: results = %+v", all)
	}
	target.mu.Lock()
	defer target.mu.Unlock()
	if len(target.got) != 0 {
		t.Errorf("the redirect was followed")
	}
}

// Outside the allowed networks a URL is refused when it is set and again
// at the dial (a name may resolve elsewhere later); plain http reaches only
// the private networks.
func TestSender_RefusesInnerAddresses(t *testing.T) {
	rv := &receiver{}
	ts := httptest.NewServer(rv)
	defer ts.Close()
	strict, results := newSender(t, nil)
	ctx := context.Background()
	for _, u := range []string{ts.URL, "https://127.0.0.1/x", "https://[::1]/x", "https://169.254.169.254/latest", "https://10.0.0.1/",
		"ftp://example.com/", "https://user:pw@example.com/", "http://93.184.216.34/"} {
		if err := strict.CheckURL(ctx, u); mcpgate.ErrorCode(err) != mcpgate.EInvalid {
			t.Errorf("CheckURL(%s) = %v, want EInvalid", u, err)
		}
	}
	if err := strict.CheckURL(ctx, "https://93.184.216.34/hook"); err != nil {
		t.Errorf("CheckURL(public https) = %v", err)
	}
	_ = strict.Send(webhook.Delivery{ID: "d1", URL: ts.URL, Body: []byte("{}"), Secret: "whsec-test"})
	all := final(t, results)
	if last := all[len(all)-1]; last.Err == nil || !strings.Contains(last.Err.Error(), "outside the allowed networks") ||
		strings.Contains(last.Err.Error(), "127.0.0.1") {
		t.Errorf("dial: results = %+v", all)
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if len(rv.got) != 0 {
		t.Errorf("the receiver got %d requests", len(rv.got))
	}
	open, _ := newSender(t, loopback)
	if err := open.CheckURL(ctx, ts.URL); err != nil {
		t.Errorf("CheckURL(private network) = %v", err)
	}
}

// TestSender_CloseCutsAttemptShort: a Close whose deadline has passed does
// not wait for the background loop's attempt under way: it cuts it short
// and gives the delivery back to the queue (not recorded as an attempt).
func TestSender_CloseCutsAttemptShort(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer ts.Close()
	defer close(release)
	s, results := newSender(t, loopback)
	_ = s.Send(webhook.Delivery{ID: "d1", URL: ts.URL, Body: []byte("{}"), Secret: "whsec-test"})
	<-arrived
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Close(ctx)
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	if len(s.q.released) != 1 || s.q.released[0] != "d1" || len(results) != 0 {
		t.Errorf("released %v, results %d: want d1 released and no attempt recorded", s.q.released, len(results))
	}
}
