package mcpgate

import (
	"context"
	"time"
)

// WebhookFormat is the body an approval webhook carries.
type WebhookFormat string

// The webhook formats.
const (
	// WebhookJSON is the gateway's own body: {"event", "approval": {...}}.
	WebhookJSON WebhookFormat = "json"
	// WebhookSlack is Slack's incoming-webhook body ({"text", "blocks"}),
	// so that the URL can be a Slack incoming webhook's.
	WebhookSlack WebhookFormat = "slack"
)

// The approval events a webhook is sent for (their names are the audit
// actions of the same steps).
const (
	EventApprovalRequested = string(ActionApprovalRequested)
	EventApprovalApproved  = string(ActionApprovalApproved)
	EventApprovalDenied    = string(ActionApprovalDenied)
	EventApprovalExpired   = string(ActionApprovalExpired)
)

// NotificationSettings are how a workspace hears of approvals: mail to the
// people who may decide, and a signed webhook. The webhook's secret is
// never answered: WebhookSecretHint tells secrets apart.
type NotificationSettings struct {
	Email             bool          `json:"email"`
	WebhookURL        string        `json:"webhook_url"`
	WebhookFormat     WebhookFormat `json:"webhook_format"`
	WebhookSecretHint string        `json:"webhook_secret_hint"`
	UpdatedAt         *time.Time    `json:"updated_at,omitempty"`
}

// NotificationInput is a PUT of the settings. WebhookSecret empty keeps the
// stored secret (it must exist while a webhook URL is set); a new one
// replaces it. It is a Secret, so that no log or error shows it.
type NotificationInput struct {
	Email         bool          `json:"email"`
	WebhookURL    string        `json:"webhook_url"`
	WebhookFormat WebhookFormat `json:"webhook_format"`
	WebhookSecret Secret        `json:"webhook_secret"`
}

// DeliveryState is where a webhook delivery stands.
type DeliveryState string

// The delivery states.
const (
	DeliveryPending   DeliveryState = "pending"
	DeliveryDelivered DeliveryState = "delivered"
	DeliveryFailed    DeliveryState = "failed"
)

// WebhookDelivery is one approval event sent to the workspace's webhook:
// its id is the X-Mcpgate-Delivery header. LastError never holds the URL's
// resolved address or the secret.
type WebhookDelivery struct {
	ID         string        `json:"id"`
	ApprovalID string        `json:"approval_id"`
	Event      string        `json:"event"`
	State      DeliveryState `json:"state"`
	Attempts   int           `json:"attempts"`
	LastStatus int           `json:"last_status,omitempty"`
	LastError  string        `json:"last_error,omitempty"`
	CreatedAt  time.Time     `json:"created_at"`
	UpdatedAt  time.Time     `json:"updated_at"`
}

// NotificationService reads and sets a workspace's approval notifications
// (owners and admins only).
type NotificationService interface {
	Notifications(ctx context.Context, a *Actor) (*NotificationSettings, error)
	SetNotifications(ctx context.Context, a *Actor, in NotificationInput) (*NotificationSettings, error)
	// WebhookDeliveries lists the latest deliveries, newest first.
	WebhookDeliveries(ctx context.Context, a *Actor) ([]WebhookDelivery, error)
}
