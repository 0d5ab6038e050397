package service_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/mail"
	"github.com/mcpgate/mcpgate/internal/mail/mailtest"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/servicetest"
	"github.com/mcpgate/mcpgate/internal/webhook"
)

const hookSecret = "whsec-0123456789abcdef"

// hookReceiver is a local webhook receiver: it checks every POST's
// signature with hookSecret itself and answers the statuses queued, then 204.
type hookReceiver struct {
	mu       sync.Mutex
	statuses []int
	events   []hookEvent
	changed  chan struct{}
}

type hookEvent struct {
	Event, Delivery string
	SignatureOK     bool
	Body            map[string]any
	Raw             string
}

func newHookReceiver(t *testing.T, statuses ...int) (*hookReceiver, string) {
	rv := &hookReceiver{statuses: statuses, changed: make(chan struct{})}
	ts := httptest.NewServer(rv)
	t.Cleanup(ts.Close)
	return rv, ts.URL + "/hook"
}

func (rv *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	m := hmac.New(sha256.New, []byte(hookSecret))
	m.Write(raw)
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if len(rv.statuses) > 0 {
		st := rv.statuses[0]
		rv.statuses = rv.statuses[1:]
		w.WriteHeader(st)
		return
	}
	ev := hookEvent{Event: r.Header.Get("X-Mcpgate-Event"), Delivery: r.Header.Get("X-Mcpgate-Delivery"), Raw: string(raw),
		SignatureOK: r.Header.Get("X-Mcpgate-Signature") == "sha256="+hex.EncodeToString(m.Sum(nil))}
	_ = json.Unmarshal(raw, &ev.Body)
	rv.events = append(rv.events, ev)
	close(rv.changed)
	rv.changed = make(chan struct{})
	w.WriteHeader(http.StatusNoContent)
}

// received is a copy of the events so far: deliveries may still arrive
// (the expiry of an approval can be sent twice, once per approval).
func (rv *hookReceiver) received() []hookEvent {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]hookEvent(nil), rv.events...)
}

// wait returns the first event named event, waiting up to 10 s.
func (rv *hookReceiver) wait(t *testing.T, event string) hookEvent {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		rv.mu.Lock()
		for _, ev := range rv.events {
			if ev.Event == event {
				rv.mu.Unlock()
				return ev
			}
		}
		ch := rv.changed
		rv.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no webhook %s within 10 s", event)
		}
	}
}

// newNotifyFixture is the pads fixture with a real mailer (to a real SMTP
// server) and a webhook sender that may reach the loopback network (as
// UPSTREAM_PRIVATE_NETWORKS=127.0.0.0/8 allows).
func newNotifyFixture(t *testing.T, nets ...netip.Prefix) (*padFixture, *mailtest.Server) {
	t.Helper()
	var svc *service.Set
	m, srv := servicetest.NewMailer(t, func(r mail.Result) { svc.Deliveries.MailDone(r) })
	pads, clk := newPadConnector(), e2bsim.NewManualClock(time.Now())
	// The sender reads real time moved on as far as the test moved the
	// services' clock, so that a retry 1 ms later falls due.
	start := clk.Now()
	var q lateQueue
	hooks := webhook.New(webhook.Options{PrivateNetworks: nets, Backoff: time.Millisecond, Attempts: 3, Queue: &q,
		Now: func() time.Time { return time.Now().Add(clk.Now().Sub(start)) }})
	t.Cleanup(func() { hooks.Close(context.Background()) })
	f := newSvcFixture(t, func(o *service.Options) {
		notes, _ := o.Registry.Connector("notes")
		o.Registry = connectors.NewRegistry(notes, pads)
		o.Now, o.Mailer, o.Webhooks = clk.Now, m, hooks
	})
	svc = f.svc
	q.d.Store(f.svc.Deliveries)
	hooks.Wake()
	if _, err := f.svc.Connections.PutConnection(context.Background(), f.owner, "pads", "pads-credential"); err != nil {
		t.Fatal(err)
	}
	pf := &padFixture{svcFixture: f, pads: pads, clock: clk}
	pf.enableEnd(t, mcpgate.ApprovalHuman)
	return pf, srv
}

var loopbackNet = netip.MustParsePrefix("127.0.0.0/8")

// lateQueue is the services' Deliveries once they are built (the sender
// is one of their options, and starts first): empty until then.
type lateQueue struct {
	d atomic.Pointer[service.Deliveries]
}

func (q *lateQueue) Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, n int) ([]webhook.Delivery, error) {
	if d := q.d.Load(); d != nil {
		return d.Claim(ctx, owner, now, lease, n)
	}
	return nil, nil
}

func (q *lateQueue) Record(ctx context.Context, owner string, r webhook.Result, next time.Time) (bool, error) {
	return q.d.Load().Record(ctx, owner, r, next)
}

func (q *lateQueue) Release(ctx context.Context, owner, id string, now time.Time) error {
	return q.d.Load().Release(ctx, owner, id, now)
}

// A kill asked for by an unattended agent reaches its approvers by mail
// and by a signed webhook (after the receiver's 500, retried), and every
// later step reaches the webhook; the secret is nowhere but the signature.
func TestNotify_MailAndWebhook(t *testing.T) {
	f, srv := newNotifyFixture(t, loopbackNet)
	ctx := context.Background()
	rv, url := newHookReceiver(t, http.StatusInternalServerError)
	set, err := f.svc.Notifications.SetNotifications(ctx, f.owner, mcpgate.NotificationInput{Email: true, WebhookURL: url, WebhookSecret: hookSecret})
	if err != nil {
		t.Fatalf("SetNotifications() err = %v", err)
	}
	if set.WebhookSecretHint != "…cdef" || set.WebhookFormat != mcpgate.WebhookJSON || !set.Email || set.WebhookURL != url {
		t.Fatalf("settings = %+v", set)
	}
	if _, err := f.svc.Workspaces.UpdateWorkspace(ctx, f.owner, mcpgate.WorkspaceUpdate{ApprovalFourEyes: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	key := f.keyActor(t, f.member)
	ap := f.request(t, key, "p1")

	// Mail: the requester (told someone else decides, under four eyes),
	// the owner and the admin, each once.
	for _, to := range []string{"owner@example.com", "admin@example.com", "member@example.com"} {
		msg := srv.Wait(t, to, "waits for approval")
		for _, want := range []string{"End pad p1, which is blue.", `the MCP key “ai” of member@example.com`, ap.URL,
			ap.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"), "pads_end"} {
			if !strings.Contains(msg.Text, want) {
				t.Errorf("mail to %s lacks %q:\n%s", to, want, msg.Text)
			}
		}
		if mustDecide := strings.Contains(msg.Text, "Another owner or admin"); mustDecide != (to == "member@example.com") {
			t.Errorf("mail to %s: told someone else decides = %v", to, mustDecide)
		}
	}
	ev := rv.wait(t, mcpgate.EventApprovalRequested)
	a, _ := ev.Body["approval"].(map[string]any)
	if !ev.SignatureOK || ev.Body["event"] != "approval.requested" || a["id"] != ap.ID || a["tool"] != "pads_end" ||
		a["summary"] != "End pad p1, which is blue." || a["url"] != ap.URL || a["workspace"] != f.ws ||
		a["requested_by"] != `the MCP key “ai” of member@example.com` || a["expires_at"] != ap.ExpiresAt.UTC().Format(time.RFC3339) {
		t.Fatalf("requested webhook = %+v", ev)
	}

	// Approved, denied, expired: each reaches the webhook.
	if _, err := f.svc.Approvals.Approve(ctx, f.admin, ap.ID); err != nil {
		t.Fatal(err)
	}
	if ev := rv.wait(t, mcpgate.EventApprovalApproved); !ev.SignatureOK || ev.Body["approval"].(map[string]any)["decided_by"] != "admin@example.com" {
		t.Errorf("approved webhook = %+v", ev)
	}
	ap2 := f.request(t, key, "p2")
	if _, err := f.svc.Approvals.Deny(ctx, f.owner, ap2.ID); err != nil {
		t.Fatal(err)
	}
	rv.wait(t, mcpgate.EventApprovalDenied)
	ap3 := f.request(t, key, "p3")
	f.clock.Advance(mcpgate.ApprovalTTL + time.Second)
	if err := f.svc.Approvals.ExpireApprovals(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := rv.wait(t, mcpgate.EventApprovalExpired); ev.Body["approval"].(map[string]any)["id"] != ap3.ID && ev.Body["approval"].(map[string]any)["id"] != ap.ID {
		t.Errorf("expired webhook = %+v", ev)
	}

	// The deliveries, for the admins: the first took two attempts.
	var list []mcpgate.WebhookDelivery
	deadline := time.Now().Add(10 * time.Second)
	for {
		if list, err = f.svc.Notifications.WebhookDeliveries(ctx, f.admin); err != nil {
			t.Fatal(err)
		}
		if done := countState(list, mcpgate.DeliveryDelivered); done >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the sender records each attempt after the receiver answered
	}
	first := list[len(list)-1]
	if first.Event != mcpgate.EventApprovalRequested || first.State != mcpgate.DeliveryDelivered || first.Attempts != 2 || first.ApprovalID != ap.ID {
		t.Errorf("first delivery = %+v", first)
	}
	if _, err := f.svc.Notifications.WebhookDeliveries(ctx, f.member); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Errorf("a member listing deliveries: err = %v", err)
	}

	// Audited: every mail and every webhook sent; no secret anywhere.
	sent := map[string]int{}
	for _, ev := range f.audit.Events() {
		if ev.Action == string(mcpgate.ActionNotificationSent) {
			sent[ev.Arguments["channel"].(string)]++
		}
	}
	if sent["email"] < 3 || sent["webhook"] < 3 {
		t.Errorf("notification.sent audited %v", sent)
	}
	all, _ := json.Marshal(f.audit.Events())
	for _, m := range srv.Messages() {
		all = append(all, m.Text+m.HTML...)
	}
	for _, ev := range rv.received() {
		all = append(all, ev.Raw...)
	}
	if strings.Contains(string(all), hookSecret) || strings.Contains(string(all), "pads-credential") {
		t.Error("a secret reached the audit log, a mail or a webhook body")
	}
}

func countState(list []mcpgate.WebhookDelivery, st mcpgate.DeliveryState) int {
	n := 0
	for _, d := range list {
		if d.State == st {
			n++
		}
	}
	return n
}

func ptr[T any](v T) *T { return &v }

// Nobody is told to decide what they may not: while the workspace requires
// two-factor sign-in, the owners and admins without it get no mail, and the
// requester is told someone else must decide. Mail goes out once per
// person per approval however often it is notified.
func TestNotify_OnlyDecidersAreTold(t *testing.T) {
	f, srv := newNotifyFixture(t)
	ctx := context.Background()
	if _, err := f.svc.Notifications.SetNotifications(ctx, f.owner, mcpgate.NotificationInput{Email: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Pool.Exec(ctx, `UPDATE workspaces SET require_two_factor = true WHERE id = $1`, f.ws); err != nil {
		t.Fatal(err)
	}
	key := f.keyActor(t, f.member)
	ap := f.request(t, key, "p1")
	msg := srv.Wait(t, "member@example.com", "waits for approval")
	if !strings.Contains(msg.Text, "Another owner or admin") {
		t.Errorf("requester's mail: %s", msg.Text)
	}
	// The expiry notifies too; it must not mail anyone again.
	f.clock.Advance(mcpgate.ApprovalTTL + time.Second)
	if err := f.svc.Approvals.ExpireApprovals(ctx); err != nil {
		t.Fatal(err)
	}
	// A second request is mailed (so the mailer has sent everything queued
	// before it): nobody but the requester got mail for the first.
	f.request(t, key, "p2")
	srv.Wait(t, "member@example.com", "waits for approval")
	n := 0
	for _, m := range srv.Messages() {
		if m.To != "member@example.com" {
			t.Errorf("mail to %s, who may not decide", m.To)
		}
		if strings.Contains(m.Text, ap.ID) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d mails about the first approval, want 1", n)
	}
}

// Bad settings are refused and change nothing: a member, a URL outside
// the allowed networks, a webhook without a secret, a short secret, an
// unknown format. Slack's shape is signed the same way.
func TestNotify_Settings(t *testing.T) {
	f, _ := newNotifyFixture(t)
	ctx := context.Background()
	for name, c := range map[string]struct {
		who  *mcpgate.Actor
		in   mcpgate.NotificationInput
		code mcpgate.Code
	}{
		"member":            {f.member, mcpgate.NotificationInput{Email: true}, mcpgate.EForbidden},
		"loopback url":      {f.owner, mcpgate.NotificationInput{WebhookURL: "http://127.0.0.1:9/hook", WebhookSecret: hookSecret}, mcpgate.EInvalid},
		"metadata url":      {f.owner, mcpgate.NotificationInput{WebhookURL: "https://169.254.169.254/", WebhookSecret: hookSecret}, mcpgate.EInvalid},
		"plain http public": {f.owner, mcpgate.NotificationInput{WebhookURL: "http://93.184.216.34/", WebhookSecret: hookSecret}, mcpgate.EInvalid},
		"no secret":         {f.owner, mcpgate.NotificationInput{WebhookURL: "https://93.184.216.34/hook"}, mcpgate.EInvalid},
		"short secret":      {f.owner, mcpgate.NotificationInput{WebhookURL: "https://93.184.216.34/hook", WebhookSecret: "short"}, mcpgate.EInvalid},
		"format":            {f.owner, mcpgate.NotificationInput{WebhookURL: "https://93.184.216.34/hook", WebhookSecret: hookSecret, WebhookFormat: "xml"}, mcpgate.EInvalid},
	} {
		_, err := f.svc.Notifications.SetNotifications(ctx, c.who, c.in)
		if mcpgate.ErrorCode(err) != c.code {
			t.Errorf("%s: err = %v, want %s", name, err, c.code)
		}
		if err != nil && strings.Contains(err.Error(), hookSecret) {
			t.Errorf("%s: the error shows the secret", name)
		}
	}
	if n, err := f.svc.Notifications.Notifications(ctx, f.owner); err != nil || n.Email || n.WebhookURL != "" || n.UpdatedAt != nil {
		t.Errorf("after refusals: %+v, %v", n, err)
	}
	if _, err := f.svc.Notifications.Notifications(ctx, f.member); mcpgate.ErrorCode(err) != mcpgate.EForbidden {
		t.Errorf("a member reading the settings: err = %v", err)
	}
	// A public https URL is taken; the secret is kept when not given again.
	if _, err := f.svc.Notifications.SetNotifications(ctx, f.owner, mcpgate.NotificationInput{WebhookURL: "https://93.184.216.34/hook", WebhookSecret: hookSecret,
		WebhookFormat: mcpgate.WebhookSlack}); err != nil {
		t.Fatal(err)
	}
	n, err := f.svc.Notifications.SetNotifications(ctx, f.owner, mcpgate.NotificationInput{WebhookURL: "https://93.184.216.34/other", WebhookFormat: mcpgate.WebhookSlack})
	if err != nil || n.WebhookSecretHint != "…cdef" || n.WebhookURL != "https://93.184.216.34/other" {
		t.Fatalf("keeping the secret: %+v, %v", n, err)
	}
	// The ciphertext is bound to its workspace and row, and moves with vault rotations.
	var ct []byte
	if err := f.db.Pool.QueryRow(ctx, `SELECT secret FROM webhook_secrets WHERE workspace_id = $1`, f.ws).Scan(&ct); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(ct), hookSecret) {
		t.Error("the secret is stored in plain text")
	}
}

// Slack's incoming-webhook shape, signed like the JSON one.
func TestNotify_SlackFormat(t *testing.T) {
	f, _ := newNotifyFixture(t, loopbackNet)
	ctx := context.Background()
	rv, url := newHookReceiver(t)
	if _, err := f.svc.Notifications.SetNotifications(ctx, f.owner, mcpgate.NotificationInput{WebhookURL: url, WebhookSecret: hookSecret,
		WebhookFormat: mcpgate.WebhookSlack}); err != nil {
		t.Fatal(err)
	}
	ap := f.request(t, f.keyActor(t, f.owner), "p<1>")
	ev := rv.wait(t, mcpgate.EventApprovalRequested)
	text, _ := ev.Body["text"].(string)
	blocks, _ := ev.Body["blocks"].([]any)
	if !ev.SignatureOK || !strings.Contains(text, "pads_end") || len(blocks) != 1 || !strings.Contains(ev.Raw, ap.URL+"|Open the request") ||
		!strings.Contains(ev.Raw, "p\\u0026lt;1\\u0026gt;") {
		t.Errorf("slack webhook = %+v", ev)
	}
}
