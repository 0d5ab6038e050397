package servicetest

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/mail"
	"github.com/mcpgate/mcpgate/internal/mail/mailtest"
)

// NewMailer returns a real mailer sending to a fresh SMTP test server, and
// that server; the mailer is closed in tb's Cleanup. done, when set, is told
// the outcome of every message, as Deliveries.MailDone is in production.
func NewMailer(tb testing.TB, done func(mail.Result)) (*mail.Mailer, *mailtest.Server) {
	tb.Helper()
	srv := mailtest.New(tb, mailtest.Options{})
	smtpSrv, err := mail.ParseURL(srv.URL())
	if err != nil {
		tb.Fatalf("mail.ParseURL() err = %v", err)
	}
	m, err := mail.New(mail.Options{Server: smtpSrv, From: "noreply@example.com", Backoff: 10 * time.Millisecond, Done: done})
	if err != nil {
		tb.Fatalf("mail.New() err = %v", err)
	}
	tb.Cleanup(func() { m.Close(context.Background()) })
	return m, srv
}

// LinkToken returns the token of the link to path (e.g. /reset-password)
// in m.
func LinkToken(tb testing.TB, m mailtest.Message, path string) string {
	tb.Helper()
	u, err := url.Parse(m.Link(tb, path))
	if err != nil || u.Path != path {
		tb.Fatalf("%s link in %q", path, m.Text)
	}
	return u.Query().Get("token")
}
