package mail_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/mail"
	"github.com/mcpgate/mcpgate/internal/mail/mailtest"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		name, raw, wantHost string
		implicit, wantErr   bool
	}{
		{name: "starttls", raw: "smtp://u:p@mail.example.com:587", wantHost: "mail.example.com:587"},
		{name: "default port", raw: "smtp://mail.example.com", wantHost: "mail.example.com:587"},
		{name: "implicit", raw: "smtps://u:p@mail.example.com", wantHost: "mail.example.com:465", implicit: true},
		{name: "http", raw: "http://mail.example.com", wantErr: true},
		{name: "no host", raw: "smtp://", wantErr: true},
		{name: "bad port", raw: "smtp://h:99999", wantErr: true},
		{name: "path", raw: "smtp://h/x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := mail.ParseURL(tt.raw)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseURL() err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				if strings.Contains(err.Error(), "p@") {
					t.Fatalf("ParseURL() error repeats the URL: %v", err)
				}
				return
			}
			if s.Host != tt.wantHost || s.ImplicitTLS != tt.implicit {
				t.Fatalf("ParseURL() = %s implicit %v, want %s implicit %v", s.Host, s.ImplicitTLS, tt.wantHost, tt.implicit)
			}
		})
	}
	s, _ := mail.ParseURL("smtp://user:hunter2-secret@h:25")
	for _, out := range []string{s.String(), fmt.Sprint(s), fmt.Sprintf("%v", *s), fmt.Sprintf("%#v", *s), fmt.Sprintf("%+v", s), s.LogValue().String()} {
		if strings.Contains(out, "hunter2") {
			t.Fatalf("server prints its password: %s", out)
		}
	}
}

func mustMailer(t *testing.T, srv *mailtest.Server, done func(mail.Result)) *mail.Mailer {
	t.Helper()
	s, err := mail.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if srv.RootCAs != nil {
		s.TLSConfig = &tls.Config{RootCAs: srv.RootCAs, MinVersion: tls.VersionTLS12}
	}
	m, err := mail.New(mail.Options{Server: s, From: "mcpgate <noreply@example.com>", Backoff: 10 * time.Millisecond, Done: done})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func TestMailer_Send(t *testing.T) {
	tests := []struct {
		name string
		opts mailtest.Options
	}{
		{name: "plain loopback", opts: mailtest.Options{}},
		{name: "starttls with auth", opts: mailtest.Options{TLS: true, Auth: true}},
		{name: "implicit tls with auth", opts: mailtest.Options{TLS: true, Implicit: true, Auth: true}},
		{name: "retried after temporary failures", opts: mailtest.Options{FailFirst: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := mailtest.New(t, tt.opts)
			results := make(chan mail.Result, 1)
			m := mustMailer(t, srv, func(r mail.Result) { results <- r })
			msg, err := mail.Render(mail.KindReset, mail.Data{To: "ada@example.com", Link: "https://gw.example/reset-password?token=abc_123-XYZ", PublicURL: "https://gw.example"})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Send(msg); err != nil {
				t.Fatal(err)
			}
			got := srv.Wait(t, "ada@example.com", "Reset your password")
			if link := got.Link(t, "/reset-password"); link != "https://gw.example/reset-password?token=abc_123-XYZ" {
				t.Fatalf("link = %q", link)
			}
			if !strings.Contains(got.HTML, `href="https://gw.example/reset-password?token=abc_123-XYZ"`) {
				t.Fatalf("html part lacks the link: %s", got.HTML)
			}
			if got.From != "noreply@example.com" || got.Header.Get("Message-Id") == "" {
				t.Fatalf("from = %q, headers %v", got.From, got.Header)
			}
			r := <-results
			if r.Err != nil || r.Attempts != tt.opts.FailFirst+1 || r.Kind != mail.KindReset {
				t.Fatalf("result = %+v, want success after %d attempts", r, tt.opts.FailFirst+1)
			}
		})
	}
}

func TestMailer_GivesUp(t *testing.T) {
	srv := mailtest.New(t, mailtest.Options{FailFirst: 100})
	results := make(chan mail.Result, 1)
	m := mustMailer(t, srv, func(r mail.Result) { results <- r })
	msg, _ := mail.Render(mail.KindVerify, mail.Data{To: "bob@example.com", Link: "https://gw.example/verify-email?token=t"})
	if err := m.Send(msg); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-results:
		if r.Err == nil || r.Attempts != 5 {
			t.Fatalf("result = %+v, want failure after 5 attempts", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no result")
	}
	if n := len(srv.Messages()); n != 0 {
		t.Fatalf("server kept %d messages", n)
	}
}

func TestMailer_WrongPassword(t *testing.T) {
	srv := mailtest.New(t, mailtest.Options{TLS: true, Auth: true})
	s, _ := mail.ParseURL(strings.Replace(srv.URL(), mailtest.Password, "wrong", 1))
	s.TLSConfig = &tls.Config{RootCAs: srv.RootCAs, MinVersion: tls.VersionTLS12}
	results := make(chan mail.Result, 1)
	m, err := mail.New(mail.Options{Server: s, From: "noreply@example.com", Attempts: 1, Done: func(r mail.Result) { results <- r }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	msg, _ := mail.Render(mail.KindVerify, mail.Data{To: "bob@example.com", Link: "https://x/verify-email?token=t"})
	_ = m.Send(msg)
	if r := <-results; r.Err == nil {
		t.Fatal("sent with the wrong password")
	}
}

func TestNew_BadFrom(t *testing.T) {
	if _, err := mail.New(mail.Options{Server: &mail.Server{Host: "h:25"}, From: "not an address"}); err == nil {
		t.Fatal("New() accepted a bad MAIL_FROM")
	}
}
