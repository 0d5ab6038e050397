package service_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/connectors"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
	"github.com/mcpgate/mcpgate/internal/mail"
	"github.com/mcpgate/mcpgate/internal/mail/mailtest"
	"github.com/mcpgate/mcpgate/internal/outbox"
	"github.com/mcpgate/mcpgate/internal/service"
)

// lateOutbox is the services' mail outbox once they are built (the mailer
// is one of their options, so it is made first).
type lateOutbox struct {
	d atomic.Pointer[service.Deliveries]
}

func (o *lateOutbox) get() mail.Outbox { return o.d.Load().MailOutbox() }

func (o *lateOutbox) Add(ctx context.Context, m *mail.Message) error { return o.get().Add(ctx, m) }

func (o *lateOutbox) Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, n int) ([]outbox.Claim[*mail.Message], error) {
	if o.d.Load() == nil {
		return nil, nil
	}
	return o.get().Claim(ctx, owner, now, lease, n)
}

func (o *lateOutbox) Record(ctx context.Context, owner string, c outbox.Claim[*mail.Message], out outbox.Outcome, next time.Time) (bool, error) {
	return o.get().Record(ctx, owner, c, out, next)
}

func (o *lateOutbox) Release(ctx context.Context, owner, id string, now time.Time) error {
	return o.get().Release(ctx, owner, id, now)
}

// outboxMailer is a mailer on the services' outbox to srv that sends only
// when the test calls RunDue (Poll -1).
func outboxMailer(t *testing.T, srv *mailtest.Server, ob *lateOutbox, done func(mail.Result)) *mail.Mailer {
	t.Helper()
	smtpSrv, err := mail.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	m, err := mail.New(mail.Options{Server: smtpSrv, From: "noreply@example.com", Backoff: time.Millisecond,
		Outbox: ob, Poll: -1, Done: done})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// An approval mail waits in the database, not in the mailer's memory: the
// mailer that queued it stops before sending it, and another (a restart,
// or another replica) sends it once, audited once, and the row is gone.
// A temporary refusal is retried; the links' mails never enter the outbox.
func TestApprovalMail_OutlivesTheMailer(t *testing.T) {
	ctx := context.Background()
	srv := mailtest.New(t, mailtest.Options{})
	var ob lateOutbox
	var svc *service.Set
	done := func(r mail.Result) { svc.Deliveries.MailDone(r) }
	first := outboxMailer(t, srv, &ob, done)
	pads, clk := newPadConnector(), e2bsim.NewManualClock(time.Now())
	f := newSvcFixture(t, func(o *service.Options) {
		notes, _ := o.Registry.Connector("notes")
		o.Registry = connectors.NewRegistry(notes, pads)
		o.Now, o.Mailer = clk.Now, first
	})
	svc = f.svc
	ob.d.Store(f.svc.Deliveries)
	if _, err := f.svc.Connections.PutConnection(ctx, f.owner, "pads", "pads-credential"); err != nil {
		t.Fatal(err)
	}
	pf := &padFixture{svcFixture: f, pads: pads, clock: clk}
	pf.enableEnd(t, mcpgate.ApprovalHuman)
	if _, err := f.svc.Notifications.SetNotifications(ctx, f.owner, mcpgate.NotificationInput{Email: true}); err != nil {
		t.Fatal(err)
	}
	ap := pf.request(t, pf.keyActor(t, f.member), "p1")

	// A reset link (a credential) is sent from memory, never stored.
	if err := f.svc.Accounts.RequestPasswordReset(ctx, "owner@example.com", "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	srv.Wait(t, "owner@example.com", "Reset")

	var queued int
	if err := f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM mail_outbox WHERE ref LIKE '%' || $1 || '%'`, ap.ID).Scan(&queued); err != nil {
		t.Fatal(err)
	}
	var all int
	if err := f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM mail_outbox`).Scan(&all); err != nil {
		t.Fatal(err)
	}
	if queued != 3 || all != 3 { // the owner, the admin and the requester; not the reset
		t.Fatalf("%d approval mails in the outbox of %d, want 3 of 3", queued, all)
	}
	first.Close(ctx) // a stop before any approval mail was sent
	if n := len(srv.Messages()); n != 1 {
		t.Fatalf("%d mails sent by the stopped mailer, want only the reset", n)
	}

	// The next mailer's server refuses its first transaction for now.
	srv2 := mailtest.New(t, mailtest.Options{FailFirst: 1})
	second := outboxMailer(t, srv2, &ob, done)
	for range 10 { // the first attempt meets the server's temporary refusal
		if _, err := second.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		if len(srv2.Messages()) == 3 {
			break
		}
		time.Sleep(5 * time.Millisecond) // the retry's 1 ms backoff
	}
	for _, to := range []string{"owner@example.com", "admin@example.com", "member@example.com"} {
		srv2.Wait(t, to, "waits for approval")
	}
	if n := len(srv2.Messages()); n != 3 {
		t.Fatalf("%d mails sent, want 3 (each once)", n)
	}
	if err := f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM mail_outbox`).Scan(&queued); err != nil || queued != 0 {
		t.Fatalf("%d rows left in the outbox (err %v)", queued, err)
	}
	sent := 0
	for _, ev := range f.audit.Events() {
		if ev.Action == string(mcpgate.ActionNotificationSent) && ev.Arguments["channel"] == "email" && ev.Arguments["approval"] == ap.ID &&
			ev.Arguments["attempts"] != nil {
			sent++
		}
	}
	if sent != 3 {
		t.Errorf("%d approval mails audited as sent, want 3", sent)
	}

}
