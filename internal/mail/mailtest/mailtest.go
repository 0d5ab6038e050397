// Package mailtest runs a real SMTP server for tests (github.com/emersion/go-smtp),
// so that the gateway's own sender is tested against a server rather than a
// mock of itself. It keeps every message it receives and decodes it.
//
// Imports from this module: none.
package mailtest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// The credentials the server accepts.
const (
	User     = "mailer"
	Password = "smtp-test-password"
)

// Options choose how the server is reached.
type Options struct {
	// TLS offers STARTTLS (or, with Implicit, speaks TLS from the start)
	// with a certificate for 127.0.0.1 that Server.RootCAs trusts.
	TLS      bool
	Implicit bool
	// Auth requires AUTH PLAIN with User and Password.
	Auth bool
	// FailFirst makes the first n deliveries fail with a temporary error.
	FailFirst int
}

// Message is one received message, decoded.
type Message struct {
	From, To string
	Header   mail.Header
	Subject  string
	Text     string
	HTML     string
	Raw      []byte
}

// Server is a running SMTP server.
type Server struct {
	// Addr is host:port.
	Addr string
	// RootCAs trusts the server's certificate (with TLS).
	RootCAs *x509.CertPool
	opts    Options

	mu       sync.Mutex
	msgs     []Message
	attempts int
	changed  chan struct{}
}

// New starts a server that stops with the test.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	s := &Server{opts: opts, changed: make(chan struct{})}
	srv := smtp.NewServer(backend{s})
	srv.Domain = "127.0.0.1"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.AllowInsecureAuth = !opts.TLS
	var l net.Listener
	var err error
	if opts.TLS {
		// Borrow httptest's certificate for 127.0.0.1 and its pool.
		hs := httptest.NewTLSServer(http.NotFoundHandler())
		cert := hs.TLS.Certificates[0]
		s.RootCAs = hs.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
		hs.Close()
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if opts.TLS && opts.Implicit {
		l, err = tls.Listen("tcp", "127.0.0.1:0", srv.TLSConfig)
	} else {
		l, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatalf("mailtest: listen: %v", err)
	}
	s.Addr = l.Addr().String()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// URL is an SMTP_URL for the server.
func (s *Server) URL() string {
	scheme := "smtp://"
	if s.opts.TLS && s.opts.Implicit {
		scheme = "smtps://"
	}
	if s.opts.Auth {
		return scheme + User + ":" + Password + "@" + s.Addr
	}
	return scheme + s.Addr
}

// Messages returns what was received so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Wait returns the first message to the address whose subject contains
// subject, waiting up to 10 s for it.
func (s *Server) Wait(t testing.TB, to, subject string) Message {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		for _, m := range s.msgs {
			if strings.EqualFold(m.To, to) && strings.Contains(m.Subject, subject) {
				s.mu.Unlock()
				return m
			}
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("mailtest: no message %q to %s within 10 s; have %d messages", subject, to, len(s.Messages()))
		}
	}
}

var linkRE = regexp.MustCompile(`https?://[^\s"<>]+`)

// Link returns the first link in the message's text part that contains
// path.
func (m Message) Link(t testing.TB, path string) string {
	t.Helper()
	for _, l := range linkRE.FindAllString(m.Text, -1) {
		if strings.Contains(l, path) {
			return l
		}
	}
	t.Fatalf("mailtest: no link with %q in %q", path, m.Text)
	return ""
}

type backend struct{ s *Server }

func (b backend) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{s: b.s}, nil }

type session struct {
	s        *Server
	authed   bool
	from, to string
}

func (se *session) AuthMechanisms() []string {
	if !se.s.opts.Auth {
		return nil
	}
	return []string{sasl.Plain}
}

func (se *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != User || pass != Password {
			return errors.New("invalid credentials")
		}
		se.authed = true
		return nil
	}), nil
}

func (se *session) Mail(from string, _ *smtp.MailOptions) error {
	if se.s.opts.Auth && !se.authed {
		return smtp.ErrAuthRequired
	}
	se.from = from
	return nil
}

func (se *session) Rcpt(to string, _ *smtp.RcptOptions) error { se.to = to; return nil }

func (se *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	se.s.mu.Lock()
	defer se.s.mu.Unlock()
	se.s.attempts++
	if se.s.attempts <= se.s.opts.FailFirst {
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
	}
	m, err := decode(raw)
	if err != nil {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "malformed message: " + err.Error()}
	}
	m.From, m.To = se.from, se.to
	se.s.msgs = append(se.s.msgs, m)
	close(se.s.changed)
	se.s.changed = make(chan struct{})
	return nil
}

func (se *session) Reset()        { se.from, se.to = "", "" }
func (se *session) Logout() error { return nil }

// decode parses a multipart/alternative message; the multipart reader undoes
// quoted-printable.
func decode(raw []byte) (Message, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Message{}, err
	}
	dec := new(mime.WordDecoder)
	subject, err := dec.DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		return Message{}, err
	}
	m := Message{Header: msg.Header, Subject: subject, Raw: raw}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		return Message{}, errors.New("not multipart/alternative")
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Message{}, err
		}
		b, err := io.ReadAll(p)
		if err != nil {
			return Message{}, err
		}
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		switch ct {
		case "text/plain":
			m.Text = strings.ReplaceAll(string(b), "\r\n", "\n")
		case "text/html":
			m.HTML = string(b)
		}
	}
	if m.Text == "" || m.HTML == "" {
		return Message{}, errors.New("missing text or html part")
	}
	return m, nil
}
