package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/webhook"
)

// durableFixture is a workspace whose webhook points at a local receiver,
// with senders made by the test on one database and one manual clock, none
// running in the background: each test says when a sender looks (RunDue).
type durableFixture struct {
	*svcFixture
	clock *e2bsim.ManualClock
	rv    *hookReceiver
}

func newDurableFixture(t *testing.T, statuses ...int) *durableFixture {
	t.Helper()
	clk := e2bsim.NewManualClock(time.Now())
	checker := webhook.New(webhook.Options{PrivateNetworks: []netip.Prefix{loopbackNet}}) // checks URLs only
	t.Cleanup(func() { checker.Close(context.Background()) })
	f := &durableFixture{svcFixture: newSvcFixture(t, func(o *service.Options) { o.Now, o.Webhooks = clk.Now, checker }), clock: clk}
	var url string
	f.rv, url = newHookReceiver(t, statuses...)
	if _, err := f.svc.Notifications.SetNotifications(context.Background(), f.owner,
		mcpgate.NotificationInput{WebhookURL: url, WebhookSecret: hookSecret}); err != nil {
		t.Fatal(err)
	}
	return f
}

// sender is one replica's webhook sender on the fixture's database.
func (f *durableFixture) sender(t *testing.T) *webhook.Sender {
	t.Helper()
	s := webhook.New(webhook.Options{PrivateNetworks: []netip.Prefix{loopbackNet}, Queue: f.svc.Deliveries, Poll: -1,
		Now: f.clock.Now, Backoff: time.Second, Attempts: 3, Lease: time.Minute, Timeout: 5 * time.Second})
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// queue queues an approval.requested delivery as the services do.
func (f *durableFixture) queue(t *testing.T) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"event": mcpgate.EventApprovalRequested, "approval": map[string]any{"id": "a1"}})
	n, err := f.db.FindWebhook(context.Background(), f.sealer, f.ws)
	if err != nil {
		t.Fatal(err)
	}
	id, err := f.db.CreateDelivery(context.Background(), store.NewDelivery{WorkspaceID: f.ws, ApprovalID: "00000000-0000-0000-0000-0000000000a1",
		Event: mcpgate.EventApprovalRequested, URL: n.URL, Body: body, Due: f.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustRunDue(t *testing.T, s *webhook.Sender, want int) {
	t.Helper()
	if n, err := s.RunDue(context.Background()); err != nil || n != want {
		t.Fatalf("RunDue() = %d, %v, want %d deliveries tried", n, err, want)
	}
}

func (f *durableFixture) delivery(t *testing.T, id string) mcpgate.WebhookDelivery {
	t.Helper()
	list, err := f.db.ListDeliveries(context.Background(), f.ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list {
		if d.ID == id {
			return d
		}
	}
	t.Fatalf("delivery %s not listed", id)
	return mcpgate.WebhookDelivery{}
}

// audited counts the webhook notification events of the given action.
func (f *durableFixture) audited(action mcpgate.AdminAction) int {
	n := 0
	for _, ev := range f.audit.Events() {
		if ev.Action == string(action) && ev.Arguments["channel"] == "webhook" {
			n++
		}
	}
	return n
}

// A delivery whose first attempt failed outlives its sender: a new sender
// on the same database (a restarted gateway) makes the next attempt when it
// is due, signed with the sealed secret; the rows hold neither the secret
// nor a signature.
func TestDeliveries_SurviveRestart(t *testing.T) {
	f := newDurableFixture(t, http.StatusInternalServerError)
	id := f.queue(t)
	first := f.sender(t)
	mustRunDue(t, first, 1)
	if d := f.delivery(t, id); d.State != mcpgate.DeliveryPending || d.Attempts != 1 || d.LastStatus != 500 {
		t.Fatalf("after the first attempt: %+v", d)
	}
	first.Close(context.Background())

	restarted := f.sender(t)
	mustRunDue(t, restarted, 0) // the retry is due after the backoff, not before
	f.clock.Advance(time.Second)
	mustRunDue(t, restarted, 1)
	if d := f.delivery(t, id); d.State != mcpgate.DeliveryDelivered || d.Attempts != 2 {
		t.Fatalf("after the restart: %+v", d)
	}
	got := f.rv.received()
	if len(got) != 1 || !got[0].SignatureOK || got[0].Delivery != id || got[0].Event != mcpgate.EventApprovalRequested {
		t.Fatalf("received %+v, want one signed delivery %s", got, id)
	}
	if f.audited(mcpgate.ActionNotificationSent) != 1 || f.audited(mcpgate.ActionNotificationFailed) != 0 {
		t.Errorf("audit = %+v", f.audit.Events())
	}
	rows := dumpRows(t, f.db)
	if strings.Contains(rows, hookSecret) || strings.Contains(rows, "sha256=") {
		t.Error("a table holds the webhook secret or a signature")
	}
	logs, _ := json.Marshal(f.audit.Events())
	if strings.Contains(string(logs), hookSecret) {
		t.Error("the audit log holds the webhook secret")
	}
}

// Out of attempts, a delivery fails for good, audited once, as before it
// was kept in the database.
func TestDeliveries_FailAfterAttempts(t *testing.T) {
	f := newDurableFixture(t, 503, 503, 503)
	id := f.queue(t)
	s := f.sender(t)
	for i, wait := range []time.Duration{0, time.Second, 2 * time.Second} {
		f.clock.Advance(wait)
		mustRunDue(t, s, 1)
		if i < 2 {
			mustRunDue(t, s, 0) // not due again before the doubled backoff
		}
	}
	if d := f.delivery(t, id); d.State != mcpgate.DeliveryFailed || d.Attempts != 3 || d.LastStatus != 503 {
		t.Fatalf("delivery = %+v", d)
	}
	f.clock.Advance(time.Hour)
	mustRunDue(t, s, 0)
	if f.audited(mcpgate.ActionNotificationFailed) != 1 || f.audited(mcpgate.ActionNotificationSent) != 0 {
		t.Errorf("audit = %+v", f.audit.Events())
	}
}

// heldReceiver holds the first POST until released, then answers 204;
// arrived is closed when the first POST is in.
type heldReceiver struct {
	*hookReceiver
	mu      sync.Mutex
	n       int
	arrived chan struct{}
	release chan struct{}
}

func (f *durableFixture) holdFirst(t *testing.T) *heldReceiver {
	h := &heldReceiver{hookReceiver: f.rv, arrived: make(chan struct{}), release: make(chan struct{})}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	t.Cleanup(h.free) // before the server closes: it waits for the held POST
	if _, err := f.svc.Notifications.SetNotifications(context.Background(), f.owner,
		mcpgate.NotificationInput{WebhookURL: ts.URL + "/hook"}); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *heldReceiver) free() {
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

func (h *heldReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.n++
	first := h.n == 1
	h.mu.Unlock()
	if first {
		close(h.arrived)
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
	}
	h.hookReceiver.ServeHTTP(w, r)
}

// Two senders on one database deliver a due delivery once: while one
// holds it (its attempt under way), the other finds nothing to claim.
func TestDeliveries_TwoSendersOnce(t *testing.T) {
	f := newDurableFixture(t)
	h := f.holdFirst(t)
	id := f.queue(t)
	a, b := f.sender(t), f.sender(t)
	done := make(chan error, 1)
	go func() { _, err := a.RunDue(context.Background()); done <- err }()
	<-h.arrived
	mustRunDue(t, b, 0)
	h.free()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mustRunDue(t, a, 0)
	mustRunDue(t, b, 0)
	if got := f.rv.received(); len(got) != 1 || got[0].Delivery != id || !got[0].SignatureOK {
		t.Fatalf("received %+v, want delivery %s once", got, id)
	}
	if d := f.delivery(t, id); d.State != mcpgate.DeliveryDelivered || d.Attempts != 1 {
		t.Errorf("delivery = %+v", d)
	}
	if f.audited(mcpgate.ActionNotificationSent) != 1 {
		t.Errorf("audit = %+v", f.audit.Events())
	}
}

// A replica that died holding a claim holds it only until the lease
// expires; then another takes the delivery over (the dead attempt counted),
// and the dead replica's late outcome changes nothing.
func TestDeliveries_ExpiredClaimTakenOver(t *testing.T) {
	f := newDurableFixture(t)
	id := f.queue(t)
	claimed, err := f.db.ClaimDeliveries(context.Background(), "crashed-replica", f.clock.Now(), time.Minute, 10)
	if err != nil || len(claimed) != 1 || claimed[0].Attempt != 1 {
		t.Fatalf("ClaimDeliveries() = %+v, %v", claimed, err)
	}
	s := f.sender(t)
	mustRunDue(t, s, 0) // the claim holds
	f.clock.Advance(time.Minute)
	mustRunDue(t, s, 1)
	if d := f.delivery(t, id); d.State != mcpgate.DeliveryDelivered || d.Attempts != 2 {
		t.Fatalf("delivery = %+v", d)
	}
	held, err := f.svc.Deliveries.Record(context.Background(), "crashed-replica", webhook.Result{ID: id, Ref: f.ws + " a1",
		Event: mcpgate.EventApprovalRequested, Attempts: 1, Final: true, Err: context.DeadlineExceeded}, time.Time{})
	if err != nil || held {
		t.Errorf("late Record() = %v, %v, want not held", held, err)
	}
	if d := f.delivery(t, id); d.State != mcpgate.DeliveryDelivered {
		t.Errorf("after the late outcome: %+v", d)
	}
	if f.audited(mcpgate.ActionNotificationSent) != 1 || f.audited(mcpgate.ActionNotificationFailed) != 0 {
		t.Errorf("audit = %+v", f.audit.Events())
	}
}

// A stop whose deadline passes during an attempt cuts it short and leaves
// the delivery claimable at once, its attempt not counted: the next sender
// delivers it (the receiver dedupes by delivery id if the first got in).
func TestDeliveries_StopDuringAttempt(t *testing.T) {
	f := newDurableFixture(t)
	h := f.holdFirst(t)
	id := f.queue(t)
	s := f.sender(t)
	done := make(chan error, 1)
	go func() { _, err := s.RunDue(context.Background()); done <- err }()
	<-h.arrived
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the stop deadline has passed
	s.Close(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var claimedBy *string
	if err := f.db.Pool.QueryRow(context.Background(), `SELECT claimed_by FROM webhook_deliveries WHERE id = $1`, id).Scan(&claimedBy); err != nil || claimedBy != nil {
		t.Fatalf("claimed_by = %v, %v, want released", claimedBy, err)
	}
	if d := f.delivery(t, id); d.State != mcpgate.DeliveryPending || d.Attempts != 0 {
		t.Fatalf("after the stop: %+v", d)
	}
	if _, err := s.RunDue(context.Background()); err == nil {
		t.Error("RunDue after Close claimed")
	}
	next := f.sender(t)
	mustRunDue(t, next, 1)
	if d := f.delivery(t, id); d.State != mcpgate.DeliveryDelivered || d.Attempts != 1 {
		t.Errorf("after the next start: %+v", d)
	}
	if got := f.rv.received(); len(got) != 1 || got[0].Delivery != id || !got[0].SignatureOK {
		t.Errorf("received %+v", got)
	}
}

// A stop with time left lets the attempt under way finish and record.
func TestDeliveries_StopWaitsForAttempt(t *testing.T) {
	f := newDurableFixture(t)
	h := f.holdFirst(t)
	id := f.queue(t)
	s := f.sender(t)
	done := make(chan error, 1)
	go func() { _, err := s.RunDue(context.Background()); done <- err }()
	<-h.arrived
	closed := make(chan struct{})
	go func() { s.Close(context.Background()); close(closed) }()
	// Free the POST only once the stop has begun: RunDue says so (until
	// then it finds the delivery claimed, and nothing to do).
	for {
		if _, err := s.RunDue(context.Background()); errors.Is(err, webhook.ErrClosed) {
			break
		}
		runtime.Gosched()
	}
	h.free()
	<-closed
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := f.delivery(t, id); d.State != mcpgate.DeliveryDelivered || d.Attempts != 1 {
		t.Errorf("after the stop: %+v", d)
	}
}

// dumpRows is every row of every table as text, for the secret scans.
func dumpRows(t *testing.T, db *store.DB) string {
	t.Helper()
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, table := range tables {
		rows, err := db.Pool.Query(ctx, `SELECT t::text FROM `+pgx.Identifier{table}.Sanitize()+` t`)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(strings.Join(lines, "\n"))
	}
	return b.String()
}

// A delivery still waiting when its workspace removed the webhook fails
// for good, audited, and is not sent anywhere.
func TestDeliveries_WebhookRemoved(t *testing.T) {
	f := newDurableFixture(t)
	id := f.queue(t)
	if _, err := f.svc.Notifications.SetNotifications(context.Background(), f.owner, mcpgate.NotificationInput{}); err != nil {
		t.Fatal(err)
	}
	mustRunDue(t, f.sender(t), 0)
	if d := f.delivery(t, id); d.State != mcpgate.DeliveryFailed || !strings.Contains(d.LastError, "removed") {
		t.Errorf("delivery = %+v", d)
	}
	if len(f.rv.received()) != 0 || f.audited(mcpgate.ActionNotificationFailed) != 1 {
		t.Errorf("received %d, audit %+v", len(f.rv.received()), f.audit.Events())
	}
}
