package service

import (
	"context"
	"strings"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/mail"
	"github.com/mcpgate/mcpgate/internal/webhook"
)

// Deliveries records what became of the mails and webhooks the services
// sent: the mailer's and the webhook sender's Done. It needs only the core
// (the store, the audit log, the log), so the wiring builds it (NewDeliveries)
// before the mailer and the sender the other services are given.
type Deliveries struct{ core }

// NewDeliveries returns the outcomes' recorder; of the options it uses DB,
// Audit, Logger and Now.
func NewDeliveries(opts Options) *Deliveries { return &Deliveries{newCore(opts.withCoreDefaults())} }

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

// WebhookDone records an attempt's outcome on its delivery, and audits the
// last one (wire it as the sender's Done).
func (s *Deliveries) WebhookDone(r webhook.Result) {
	ctx := context.Background()
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
	if err := s.db.UpdateDelivery(ctx, d); err != nil {
		s.log.Warn("webhook delivery not recorded", "delivery", r.ID, "err", err)
	}
	if !r.Final {
		return
	}
	ws, approval, _ := strings.Cut(r.Ref, " ")
	ev := mcpgate.AuditEvent{WorkspaceID: ws, Kind: mcpgate.KindAdmin, Action: string(mcpgate.ActionNotificationSent), Outcome: mcpgate.OutcomeOK,
		Arguments: map[string]any{"channel": "webhook", "event": r.Event, "approval": approval, "delivery": r.ID, "attempts": r.Attempts, "status": r.Status}}
	if r.Err != nil {
		ev.Action, ev.Outcome, ev.Message = string(mcpgate.ActionNotificationFailed), mcpgate.OutcomeError, d.LastError
	}
	s.record(ctx, ev)
}
