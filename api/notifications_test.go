package api_test

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/webhook"
)

// The notification settings over the API: an admin's PUT answers the
// secret only as a hint, a URL outside the allowed networks is 400, and
// another workspace's settings and deliveries are 404.
func TestNotifications_API(t *testing.T) {
	hooks := webhook.New(webhook.Options{PrivateNetworks: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}})
	t.Cleanup(func() { hooks.Close(t.Context()) })
	ts := newTestServer(t, api.Options{}, func(o *service.Options) { o.Webhooks = hooks })
	ada, bob := ts.signedUp(t, "ada@example.com"), ts.signedUp(t, "bob@example.com")
	ws := ada.mustWorkspace("team")
	base := "/api/v1/workspaces/" + ws + "/notifications"
	secret := "whsec-api-0123456789abcdef"

	r := ada.do("PUT", base, map[string]any{"webhook_url": "http://10.20.1.2:8080/hook", "webhook_format": "slack", "webhook_secret": secret}).
		wantStatus(t, http.StatusOK)
	var n mcpgate.NotificationSettings
	r.decode(t, &n)
	if n.WebhookURL != "http://10.20.1.2:8080/hook" || n.WebhookFormat != mcpgate.WebhookSlack || n.WebhookSecretHint != "…cdef" {
		t.Errorf("PUT = %+v", n)
	}
	if got := ada.do("GET", base, nil).wantStatus(t, http.StatusOK); strings.Contains(string(got.Body), secret) || !strings.Contains(string(got.Body), "…cdef") {
		t.Errorf("GET = %s", string(got.Body))
	}
	if code := ada.do("PUT", base, map[string]any{"webhook_url": "http://10.30.0.1/hook", "webhook_secret": secret}).
		wantStatus(t, http.StatusBadRequest).errorCode(t); code != mcpgate.EInvalid {
		t.Errorf("outside the allowed networks: %s", code)
	}
	ada.do("GET", base+"/deliveries", nil).wantStatus(t, http.StatusOK)
	for _, m := range []string{"GET", "PUT"} {
		bob.do(m, base, map[string]any{"email": false}).wantStatus(t, http.StatusNotFound)
	}
	bob.do("GET", base+"/deliveries", nil).wantStatus(t, http.StatusNotFound)
	if got := ada.do("GET", base, nil).wantStatus(t, http.StatusOK); !strings.Contains(string(got.Body), "10.20.1.2") {
		t.Errorf("a refused PUT changed the settings: %s", string(got.Body))
	}
}
