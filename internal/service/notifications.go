package service

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/mail"
	"github.com/mcpgate/mcpgate/internal/store"
)

// Webhooks sends approval webhooks (internal/webhook's Sender): the rule a
// URL must meet, checked when it is set, and the background delivery, which
// holds every dial to the same rule. A delivery is queued as a row
// (store.CreateDelivery) that any replica's sender may claim; Wake tells
// this replica's to look at once.
type Webhooks interface {
	CheckURL(ctx context.Context, raw string) error
	Wake()
}

// Approval mails are throttled like every other mail (throttleMail), per
// recipient and per workspace; past a limit the mail is left out (and the
// omission audited), never the approval.
const (
	approvalMailsPerTarget    = 10
	approvalMailsPerWorkspace = 60
)

// Notifications implements mcpgate.NotificationService.
func (s *Notifications) Notifications(ctx context.Context, a *mcpgate.Actor) (*mcpgate.NotificationSettings, error) {
	if err := requireAdmin(a); err != nil {
		return nil, err
	}
	return s.db.Notifications(ctx, a.WorkspaceID)
}

// SetNotifications implements mcpgate.NotificationService. The secret is
// sealed like an E2B key and answered only as a hint; the audit log names
// the webhook's host, never its path (a Slack webhook's path is its key)
// or the secret.
func (s *Notifications) SetNotifications(ctx context.Context, a *mcpgate.Actor, in mcpgate.NotificationInput) (*mcpgate.NotificationSettings, error) {
	if err := s.requireAdminChange(ctx, a); err != nil {
		return nil, err
	}
	in.WebhookURL = strings.TrimSpace(in.WebhookURL)
	in.WebhookSecret = mcpgate.Secret(strings.TrimSpace(in.WebhookSecret.Reveal()))
	if in.WebhookFormat == "" {
		in.WebhookFormat = mcpgate.WebhookJSON
	}
	if in.WebhookFormat != mcpgate.WebhookJSON && in.WebhookFormat != mcpgate.WebhookSlack {
		return nil, mcpgate.Errorf(mcpgate.EInvalid, "webhook_format must be json or slack")
	}
	if in.Email && s.opts.Mailer == nil {
		return nil, mcpgate.Errorf(mcpgate.EUnavailable, "this gateway cannot send email: its operator has not configured SMTP_URL")
	}
	hint := ""
	if in.WebhookURL == "" {
		in.WebhookSecret = ""
	} else {
		if s.opts.Webhooks == nil {
			return nil, mcpgate.Errorf(mcpgate.EUnavailable, "this gateway does not send webhooks")
		}
		if err := s.opts.Webhooks.CheckURL(ctx, in.WebhookURL); err != nil {
			return nil, err
		}
		if n := len(in.WebhookSecret.Reveal()); n > 0 && (n < 16 || n > 256) {
			return nil, mcpgate.Errorf(mcpgate.EInvalid, "webhook_secret must be 16 to 256 characters (a long random string)")
		}
		if k := in.WebhookSecret.Reveal(); k != "" {
			hint = "…" + k[len(k)-4:]
		}
	}
	if err := s.db.SetNotifications(ctx, s.opts.Keyring, a.WorkspaceID, in, hint); err != nil {
		return nil, err
	}
	s.record(ctx, mcpgate.NewAdminEvent(a, mcpgate.ActionNotificationsUpdated, map[string]any{
		"email": in.Email, "webhook_host": urlHost(in.WebhookURL), "webhook_format": string(in.WebhookFormat),
		"webhook_secret_replaced": in.WebhookSecret != ""}))
	return s.db.Notifications(ctx, a.WorkspaceID)
}

// WebhookDeliveries implements mcpgate.NotificationService.
func (s *Notifications) WebhookDeliveries(ctx context.Context, a *mcpgate.Actor) ([]mcpgate.WebhookDelivery, error) {
	if err := requireAdmin(a); err != nil {
		return nil, err
	}
	return s.db.ListDeliveries(ctx, a.WorkspaceID)
}

// urlHost is what logs and the audit log say of a webhook URL.
func urlHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// notifyApproval tells the workspace's channels of an approval's step
// (event, one of the mcpgate.EventApproval* names): the webhook for every
// step, mail for a request. It runs after the step is stored and audited,
// and nothing in it fails the step: a channel that cannot be reached is
// logged and audited.
func (s *Notifications) notifyApproval(ctx context.Context, event string, ap *mcpgate.ApprovalRequest) {
	ctx = context.WithoutCancel(ctx)
	n, err := s.db.Notifications(ctx, ap.WorkspaceID)
	if err != nil {
		s.log.WarnContext(ctx, "approval not notified", "event", event, "approval", ap.ID, "err", err)
		return
	}
	if !n.Email && n.WebhookURL == "" {
		return
	}
	s.approvals.present(ap)
	au, err := s.db.ApprovalAudience(ctx, ap.WorkspaceID, ap.RequestedBy)
	if err != nil {
		s.log.WarnContext(ctx, "approval not notified", "event", event, "approval", ap.ID, "err", err)
		return
	}
	asked := s.requesterText(ctx, ap)
	if n.WebhookURL != "" && s.opts.Webhooks != nil {
		s.sendWebhook(ctx, event, ap, au, asked)
	}
	if n.Email && event == mcpgate.EventApprovalRequested && s.opts.Mailer != nil {
		s.mailApprovers(ctx, ap, au, asked)
	}
}

// requesterText says who asked: the connected app or the MCP key by name,
// and the person it belongs to.
func (s *Notifications) requesterText(ctx context.Context, ap *mcpgate.ApprovalRequest) string {
	who := ap.RequesterEmail
	if who == "" {
		who = "a member"
	}
	if ap.ClientName != "" {
		return "the connected app “" + ap.ClientName + "” of " + who
	}
	if k, err := s.db.FindKey(ctx, ap.WorkspaceID, ap.KeyID); err == nil {
		return "the MCP key “" + k.Name + "” of " + who
	}
	return who
}

// mayDecide reports whether a person may decide the request under the
// workspace's rules (requireDecider): nobody is told to approve what they
// may not.
func mayDecide(au *store.Audience, p store.Approver, requestedBy string) bool {
	if au.TwoFactor && !p.TwoFactor {
		return false
	}
	return !(au.FourEyes && p.UserID == requestedBy)
}

// mailApprovers mails the requester and every owner and admin who may
// decide, each at most once per approval, within the mail throttle.
func (s *Notifications) mailApprovers(ctx context.Context, ap *mcpgate.ApprovalRequest, au *store.Audience, asked string) {
	for _, p := range au.People {
		can := mayDecide(au, p, ap.RequestedBy)
		if !can && p.UserID != ap.RequestedBy {
			continue
		}
		if first, err := s.db.MarkNoticed(ctx, ap.ID, p.UserID); err != nil || !first {
			continue
		}
		ev := mcpgate.AuditEvent{WorkspaceID: ap.WorkspaceID, Kind: mcpgate.KindAdmin, Action: string(mcpgate.ActionNotificationSent),
			Outcome: mcpgate.OutcomeOK, Arguments: map[string]any{"channel": "email", "event": mcpgate.EventApprovalRequested,
				"approval": ap.ID, "recipient": p.UserID}}
		if err := s.throttleMail(ctx, mailSend{kind: "approval", to: p.Email, workspace: ap.WorkspaceID,
			perTarget: approvalMailsPerTarget, perWorkspace: approvalMailsPerWorkspace}); err != nil {
			ev.Action, ev.Outcome, ev.Message = string(mcpgate.ActionNotificationFailed), mcpgate.OutcomeError, "too many approval mails just now: this one was left out"
			s.record(ctx, ev)
			continue
		}
		msg, err := mail.Render(mail.KindApprovalRequested, mail.Data{To: p.Email, Link: ap.URL, PublicURL: s.opts.PublicURL,
			Approval: &mail.Approval{Tool: toolLabel(ap), Summary: ap.Summary, RequestedBy: asked, Workspace: au.WorkspaceName,
				Expires: ap.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"), CanDecide: can}})
		if err == nil {
			msg.Ref = approvalMailRef(ap.WorkspaceID, ap.ID, p.UserID)
			// The approval mail waits in the outbox (a stop or a crash
			// loses none); it holds no credential: the link leads to a
			// page behind sign-in.
			err = s.opts.Mailer.SendDurable(ctx, msg)
		}
		if err != nil {
			s.log.ErrorContext(ctx, "approval mail not queued", "approval", ap.ID, "err", err)
			ev.Action, ev.Outcome, ev.Message = string(mcpgate.ActionNotificationFailed), mcpgate.OutcomeError, "the mail could not be queued"
			s.record(ctx, ev)
		}
		// Queued: MailDone audits the outcome once the server answered.
	}
}

func toolLabel(ap *mcpgate.ApprovalRequest) string {
	if ap.ToolTitle != "" {
		return ap.ToolTitle + " (" + ap.Tool + ")"
	}
	return ap.Tool
}

// An approval mail's Ref carries what MailDone audits it under.
const approvalRefPrefix = "approval "

func approvalMailRef(workspaceID, approvalID, userID string) string {
	return approvalRefPrefix + workspaceID + " " + approvalID + " " + userID
}

// webhookApproval is the approval as a JSON webhook carries it.
type webhookApproval struct {
	ID            string    `json:"id"`
	Tool          string    `json:"tool"`
	Summary       string    `json:"summary"`
	URL           string    `json:"url"`
	RequestedBy   string    `json:"requested_by"`
	ExpiresAt     time.Time `json:"expires_at"`
	Workspace     string    `json:"workspace"`
	WorkspaceName string    `json:"workspace_name"`
	State         string    `json:"state"`
	DecidedBy     string    `json:"decided_by,omitempty"`
}

// webhookBody renders an event in the workspace's format.
func webhookBody(format mcpgate.WebhookFormat, event string, wa webhookApproval) ([]byte, error) {
	if format != mcpgate.WebhookSlack {
		return json.Marshal(map[string]any{"event": event, "approval": wa})
	}
	// Slack's incoming-webhook shape: text (the notification's) and one
	// mrkdwn section; & < > are escaped as Slack asks.
	esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace
	head := map[string]string{
		mcpgate.EventApprovalRequested: "waits for approval", mcpgate.EventApprovalApproved: "was approved",
		mcpgate.EventApprovalDenied: "was denied", mcpgate.EventApprovalExpired: "expired unanswered",
	}[event]
	text := "A call of " + esc(wa.Tool) + " in " + esc(wa.WorkspaceName) + " " + head
	detail := "*" + text + "*\n" + esc(wa.Summary) + "\nAsked by " + esc(wa.RequestedBy)
	if wa.DecidedBy != "" {
		detail += "; decided by " + esc(wa.DecidedBy)
	}
	detail += "\nExpires " + wa.ExpiresAt.UTC().Format(time.RFC3339) + "\n<" + wa.URL + "|Open the request>"
	return json.Marshal(map[string]any{"text": text, "blocks": []any{
		map[string]any{"type": "section", "text": map[string]string{"type": "mrkdwn", "text": detail}}}})
}

// sendWebhook queues a delivery in the database, where it outlives this
// process, and wakes the sender; the sender records every attempt through
// Deliveries (its Queue).
func (s *Notifications) sendWebhook(ctx context.Context, event string, ap *mcpgate.ApprovalRequest, au *store.Audience, asked string) {
	fail := func(msg string, err error) {
		s.log.WarnContext(ctx, "approval webhook not sent", "event", event, "approval", ap.ID, "err", err)
		s.record(ctx, mcpgate.AuditEvent{WorkspaceID: ap.WorkspaceID, Kind: mcpgate.KindAdmin, Action: string(mcpgate.ActionNotificationFailed),
			Outcome: mcpgate.OutcomeError, Message: msg, Arguments: map[string]any{"channel": "webhook", "event": event, "approval": ap.ID}})
	}
	t, err := s.db.FindWebhook(ctx, s.opts.Keyring, ap.WorkspaceID)
	if err != nil {
		fail("the webhook's settings could not be read", err)
		return
	}
	body, err := webhookBody(t.Format, event, webhookApproval{ID: ap.ID, Tool: ap.Tool, Summary: ap.Summary, URL: ap.URL, RequestedBy: asked,
		ExpiresAt: ap.ExpiresAt.UTC(), Workspace: ap.WorkspaceID, WorkspaceName: au.WorkspaceName, State: string(ap.State),
		DecidedBy: ap.DecidedByEmail})
	if err != nil {
		fail("the webhook's body could not be built", err)
		return
	}
	if _, err := s.db.CreateDelivery(ctx, store.NewDelivery{WorkspaceID: ap.WorkspaceID, ApprovalID: ap.ID, Event: event,
		URL: t.URL, Body: body, Due: s.now()}); err != nil {
		fail("the delivery could not be recorded", err)
		return
	}
	s.opts.Webhooks.Wake()
}
