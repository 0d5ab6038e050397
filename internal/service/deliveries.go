package service

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/mail"
	"github.com/mcpgate/mcpgate/internal/outbox"
	"github.com/mcpgate/mcpgate/internal/store"
	"github.com/mcpgate/mcpgate/internal/webhook"
	"github.com/mcpgate/mcpgate/vault"
)

// Deliveries records what became of the mails and webhooks the services
// sent: the mailer's Done, and the webhook sender's Queue (the deliveries'
// rows, which every replica shares). It needs only the core (the store, the
// audit log, the log) and the keyring that opens the webhooks' secrets, so
// the wiring builds it (NewDeliveries) before the mailer and the sender the
// other services are given.
type Deliveries struct {
	core
	keyring *vault.Keyring
}

// NewDeliveries returns the outcomes' recorder; of the options it uses DB,
// Keyring, Audit, Logger and Now.
func NewDeliveries(opts Options) *Deliveries {
	return &Deliveries{core: newCore(opts.withCoreDefaults()), keyring: opts.Keyring}
}

// Deliveries is the webhook sender's Queue.
var _ webhook.Queue = (*Deliveries)(nil)

// MailDone audits the outcome of one email (wire it as the mailer's Done).
// The event names the kind of message and the attempts, never the link.
func (s *Deliveries) MailDone(r mail.Result) {
	if r.Ref == "" {
		return // a sign-up's link: no account, so no audit log, yet
	}
	if s.approvalMailDone(r) {
		return
	}
	ctx := context.Background()
	u, err := s.db.FindUserByID(ctx, r.Ref)
	if err != nil {
		s.log.Warn("mail outcome not audited", "kind", r.Kind, "err", err)
		return
	}
	ev := s.accountEvent(ctx, u, mcpgate.ActionMailSent, map[string]any{"kind": string(r.Kind), "attempts": r.Attempts})
	if ev == nil {
		return
	}
	if r.Err != nil {
		ev.Outcome = mcpgate.OutcomeError
		ev.Message = "the mail server did not accept the message"
	}
	s.record(ctx, *ev)
}

// approvalMailDone audits an approval mail's outcome in its workspace; ok
// is false for a Ref that is not an approval mail's.
func (s *Deliveries) approvalMailDone(r mail.Result) bool {
	rest, ok := strings.CutPrefix(r.Ref, approvalRefPrefix)
	if !ok {
		return false
	}
	f := strings.Fields(rest)
	if len(f) != 3 {
		return true
	}
	ev := mcpgate.AuditEvent{WorkspaceID: f[0], Kind: mcpgate.KindAdmin, Action: string(mcpgate.ActionNotificationSent),
		Outcome: mcpgate.OutcomeOK, Arguments: map[string]any{"channel": "email", "event": mcpgate.EventApprovalRequested,
			"approval": f[1], "recipient": f[2], "attempts": r.Attempts}}
	if r.Err != nil {
		ev.Action, ev.Outcome, ev.Message = string(mcpgate.ActionNotificationFailed), mcpgate.OutcomeError, "the mail server did not accept the message"
	}
	s.record(context.Background(), ev)
	return true
}

// Claim implements webhook.Queue: the due deliveries, each with its
// workspace's secret opened to sign it. A delivery whose workspace has no
// webhook any more fails for good; one whose secret cannot be opened now is
// released, to be tried again later.
func (s *Deliveries) Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]webhook.Delivery, error) {
	rows, err := s.db.ClaimDeliveries(ctx, owner, now, lease, limit)
	if err != nil {
		return nil, err
	}
	secrets := map[string]mcpgate.Secret{}
	ds := make([]webhook.Delivery, 0, len(rows))
	for _, r := range rows {
		d := webhook.Delivery{ID: r.ID, Ref: r.WorkspaceID + " " + r.ApprovalID, Event: r.Event, URL: r.URL, Body: r.Body, Attempt: r.Attempt}
		secret, ok := secrets[r.WorkspaceID]
		if !ok {
			t, err := s.db.FindWebhook(ctx, s.keyring, r.WorkspaceID)
			switch {
			case mcpgate.ErrorCode(err) == mcpgate.ENotFound:
				_, _ = s.Record(ctx, owner, webhook.Result{ID: d.ID, Ref: d.Ref, Event: d.Event, Attempts: d.Attempt, Final: true,
					Err: errors.New("the workspace's webhook was removed before this delivery went out")}, time.Time{})
				continue
			case err != nil:
				s.log.WarnContext(ctx, "webhook secret not opened; delivery released", "delivery", d.ID, "err", err)
				if err := s.db.ReleaseDelivery(ctx, owner, d.ID, now.Add(lease)); err != nil {
					s.log.WarnContext(ctx, "webhook delivery not released; its claim will expire", "delivery", d.ID, "err", err)
				}
				continue
			}
			secret = t.Secret
			secrets[r.WorkspaceID] = secret
		}
		d.Secret = secret
		ds = append(ds, d)
	}
	return ds, nil
}

// Release implements webhook.Queue.
func (s *Deliveries) Release(ctx context.Context, owner, id string, now time.Time) error {
	return s.db.ReleaseDelivery(ctx, owner, id, now)
}

// Record implements webhook.Queue: it records an attempt's outcome on its
// delivery, and audits the last one (notification.sent or
// notification.failed), once: only the sender that still held the claim
// records.
func (s *Deliveries) Record(ctx context.Context, owner string, r webhook.Result, next time.Time) (bool, error) {
	d := mcpgate.WebhookDelivery{ID: r.ID, State: mcpgate.DeliveryPending, Attempts: r.Attempts, LastStatus: r.Status}
	if r.Err != nil {
		d.LastError = r.Err.Error()
	}
	if r.Final {
		d.State = mcpgate.DeliveryDelivered
		if r.Err != nil {
			d.State = mcpgate.DeliveryFailed
		}
	}
	held, err := s.db.RecordDelivery(ctx, owner, d, next)
	if err != nil || !held || !r.Final {
		return held, err
	}
	ws, approval, _ := strings.Cut(r.Ref, " ")
	ev := mcpgate.AuditEvent{WorkspaceID: ws, Kind: mcpgate.KindAdmin, Action: string(mcpgate.ActionNotificationSent), Outcome: mcpgate.OutcomeOK,
		Arguments: map[string]any{"channel": "webhook", "event": r.Event, "approval": approval, "delivery": r.ID, "attempts": r.Attempts, "status": r.Status}}
	if r.Err != nil {
		ev.Action, ev.Outcome, ev.Message = string(mcpgate.ActionNotificationFailed), mcpgate.OutcomeError, d.LastError
	}
	s.record(context.WithoutCancel(ctx), ev)
	return true, nil
}

// MailOutbox is the mailer's Outbox over the database (wire it as
// mail.Options.Outbox): approval mails wait there until their last attempt.
func (s *Deliveries) MailOutbox() mail.Outbox { return mailOutbox{s} }

type mailOutbox struct{ s *Deliveries }

func (o mailOutbox) Add(ctx context.Context, m *mail.Message) error {
	_, err := o.s.db.QueueMail(ctx, store.OutboxMail{Kind: string(m.Kind), Ref: m.Ref, To: m.To, Subject: m.Subject, Text: m.Text, HTML: m.HTML})
	return err
}

func (o mailOutbox) Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, limit int) ([]outbox.Claim[*mail.Message], error) {
	rows, err := o.s.db.ClaimMails(ctx, owner, now, lease, limit)
	cs := make([]outbox.Claim[*mail.Message], len(rows))
	for i, r := range rows {
		cs[i] = outbox.Claim[*mail.Message]{ID: r.ID, Attempt: r.Attempt,
			Item: &mail.Message{Kind: mail.Kind(r.Kind), Ref: r.Ref, To: r.To, Subject: r.Subject, Text: r.Text, HTML: r.HTML}}
	}
	return cs, err
}

func (o mailOutbox) Record(ctx context.Context, owner string, c outbox.Claim[*mail.Message], out outbox.Outcome, next time.Time) (bool, error) {
	var last string
	if out.Err != nil {
		last = out.Err.Error()
	}
	return o.s.db.RecordMail(ctx, owner, c.ID, out.Final, last, next)
}

func (o mailOutbox) Release(ctx context.Context, owner, id string, now time.Time) error {
	return o.s.db.ReleaseMail(ctx, owner, id, now)
}
