package mail

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"log/slog"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/outbox"
	"github.com/mcpgate/mcpgate/internal/retryqueue"
)

//go:embed templates/*
var files embed.FS

// Kind names a message the gateway sends; it selects the templates
// (templates/<kind>.txt and .html) and the subject, and is what the audit
// log records about a send (never the link).
type Kind string

// The messages.
const (
	KindReset  Kind = "reset"
	KindVerify Kind = "verify"
	// KindEmailChanged tells the old address that the account moved.
	KindEmailChanged Kind = "email_changed"
	// KindAccountExists answers a sign-up with an address that has an
	// account already: its owner is told, the one signing up sees the same
	// answer as for a new address.
	KindAccountExists Kind = "account_exists"
	// KindApprovalRequested tells the requester and the people who may
	// decide that a call waits for a person's approval (Data.Approval).
	KindApprovalRequested Kind = "approval_requested"
)

var subjects = map[Kind]string{
	KindReset:             "Reset your password",
	KindVerify:            "Confirm your email address",
	KindEmailChanged:      "Your account's email address was changed",
	KindAccountExists:     "You already have an account",
	KindApprovalRequested: "An AI client's call waits for approval",
}

// Server is where mail is sent, parsed from SMTP_URL.
type Server struct {
	// Host is host:port.
	Host string
	// ImplicitTLS is smtps://: TLS from the first byte (port 465). Otherwise
	// STARTTLS is used, and required unless the host is loopback.
	ImplicitTLS bool
	User        string
	// Password is a Secret (and exported, so that fmt calls its methods):
	// even %#v of a Server hides it.
	Password mcpgate.Secret
	// TLSConfig, when set, replaces the default (tests trust their own CA).
	TLSConfig *tls.Config
}

// String shows the server without its password.
func (s Server) String() string {
	scheme := "smtp"
	if s.ImplicitTLS {
		scheme = "smtps"
	}
	if s.User != "" {
		return scheme + "://" + s.User + ":[redacted]@" + s.Host
	}
	return scheme + "://" + s.Host
}

// LogValue keeps the password out of logs.
func (s Server) LogValue() slog.Value { return slog.StringValue(s.String()) }

// ParseURL reads SMTP_URL: smtp://user:pass@host:587 (STARTTLS) or
// smtps://user:pass@host:465 (implicit TLS). The port defaults to 587 and
// 465. Errors never repeat the URL, which holds the password.
func ParseURL(raw string) (*Server, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("SMTP_URL is not a URL; use smtp://user:password@host:587 or smtps://user:password@host:465")
	}
	s := &Server{}
	port := "587"
	switch u.Scheme {
	case "smtp":
	case "smtps":
		s.ImplicitTLS, port = true, "465"
	default:
		return nil, errors.New("SMTP_URL must start with smtp:// (STARTTLS) or smtps:// (implicit TLS)")
	}
	if u.Hostname() == "" {
		return nil, errors.New("SMTP_URL has no host")
	}
	if u.Port() != "" {
		if n, err := strconv.Atoi(u.Port()); err != nil || n < 1 || n > 65535 {
			return nil, errors.New("SMTP_URL has an invalid port")
		}
		port = u.Port()
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return nil, errors.New("SMTP_URL takes no path or query")
	}
	s.Host = net.JoinHostPort(u.Hostname(), port)
	if u.User != nil {
		s.User = u.User.Username()
		pw, _ := u.User.Password()
		s.Password = mcpgate.Secret(pw)
	}
	return s, nil
}

// Message is one rendered email.
type Message struct {
	Kind Kind
	// Ref is the caller's own reference (a user id), given back in the
	// Result; it is not sent.
	Ref     string
	To      string
	Subject string
	Text    string
	HTML    string
}

// Data is what the templates are given.
type Data struct {
	To   string
	Link string
	// NewEmail is the address an account moved to (KindEmailChanged).
	NewEmail  string
	Product   string
	PublicURL string
	// Approval is the call waiting (KindApprovalRequested); Link is its
	// page.
	Approval *Approval
}

// Approval is what an approval mail says of the call.
type Approval struct {
	Tool, Summary string
	// RequestedBy says who asked: the key or connected app by name, and
	// its person.
	RequestedBy string
	Workspace   string
	// Expires is the expiry as people read it (UTC).
	Expires string
	// CanDecide is whether the recipient may decide (else, the requester
	// under four eyes or without the two-factor sign-in required, they are
	// told someone else must).
	CanDecide bool
}

var (
	textTemplates = map[Kind]*texttemplate.Template{}
	htmlTemplates = map[Kind]*htmltemplate.Template{}
	layout        = htmltemplate.Must(htmltemplate.ParseFS(files, "templates/layout.html"))
)

func init() {
	for k := range subjects {
		textTemplates[k] = texttemplate.Must(texttemplate.ParseFS(files, "templates/"+string(k)+".txt"))
		htmlTemplates[k] = htmltemplate.Must(htmltemplate.ParseFS(files, "templates/"+string(k)+".html"))
	}
}

// Render builds the message of a kind for d.To.
func Render(kind Kind, d Data) (*Message, error) {
	tt, ok := textTemplates[kind]
	if !ok {
		return nil, fmt.Errorf("no mail template %q", kind)
	}
	if d.Product == "" {
		d.Product = "mcpgate"
	}
	var txt, body, page bytes.Buffer
	if err := tt.Execute(&txt, d); err != nil {
		return nil, fmt.Errorf("render %s text: %w", kind, err)
	}
	if err := htmlTemplates[kind].Execute(&body, d); err != nil {
		return nil, fmt.Errorf("render %s html: %w", kind, err)
	}
	// The body is our own template's output, already escaped.
	err := layout.Execute(&page, map[string]any{"Subject": subjects[kind], "Body": htmltemplate.HTML(body.String()), //nolint:gosec
		"Product": d.Product, "PublicURL": d.PublicURL})
	if err != nil {
		return nil, fmt.Errorf("render %s layout: %w", kind, err)
	}
	return &Message{Kind: kind, To: d.To, Subject: subjects[kind], Text: txt.String(), HTML: page.String()}, nil
}

// Result is the outcome of one message, after its last attempt.
type Result struct {
	Kind     Kind
	Ref      string
	To       string
	Attempts int
	Err      error
}

// Options configure a Mailer.
type Options struct {
	Server *Server
	// From is MAIL_FROM, an address with an optional name.
	From   string
	Logger *slog.Logger
	// Attempts is how many times a message is tried (default 5), waiting
	// Backoff (default 2 s) doubled after each failure.
	Attempts int
	Backoff  time.Duration
	// Timeout bounds one attempt (default 30 s).
	Timeout time.Duration
	// Done is told the outcome of every message; the services audit it.
	Done func(Result)
	// Outbox, when set, holds the messages given to SendDurable in the
	// database until their last attempt (approval mails: a person waits
	// on them); nil sends those from memory like the others.
	Outbox Outbox
	// Poll is how often the outbox is looked at besides at start and on
	// Wake (default 30 s; negative: never in the background, for tests,
	// which call RunDue).
	Poll time.Duration
}

// Outbox is where durable messages wait between attempts: rows every
// replica shares (see internal/outbox). It never holds a message that
// carries a credential: SendDurable's callers send none.
type Outbox interface {
	outbox.Queue[*Message]
	// Add stores msg, due at once.
	Add(ctx context.Context, msg *Message) error
}

// Mailer sends messages from a queue in the background, so that no request
// waits on (or reveals, by its timing) the mail server.
type Mailer struct {
	opts  Options
	from  *mail.Address
	queue *retryqueue.Queue[*Message]
	// durable sends what waits in the Outbox (nil without one).
	durable *outbox.Runner[*Message]
}

// ErrQueueFull is Send's answer when too many messages are waiting.
var ErrQueueFull = errors.New("mail queue full")

// New returns a running mailer; Close stops it.
func New(opts Options) (*Mailer, error) {
	from, err := mail.ParseAddress(opts.From)
	if err != nil {
		return nil, fmt.Errorf("MAIL_FROM %q is not an email address", opts.From)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 5
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 2 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	m := &Mailer{opts: opts, from: from}
	m.queue = retryqueue.New(retryqueue.Options{Attempts: opts.Attempts, Backoff: opts.Backoff}, m.try)
	if opts.Outbox != nil {
		m.durable = outbox.New(outbox.Options[*Message]{Name: "mail", Queue: opts.Outbox,
			Attempt: func(ctx context.Context, c outbox.Claim[*Message]) (int, error) {
				err := m.sendOnce(ctx, c.Item)
				return replyCode(err), err
			},
			Permanent: permanentReply, Attempts: opts.Attempts, Backoff: opts.Backoff, Poll: opts.Poll,
			Lease: opts.Timeout + 30*time.Second, Logger: opts.Logger,
			Done: func(c outbox.Claim[*Message], o outbox.Outcome) {
				if opts.Done != nil {
					opts.Done(Result{Kind: c.Item.Kind, Ref: c.Item.Ref, To: c.Item.To, Attempts: o.Attempts, Err: o.Err})
				}
			}})
	}
	return m, nil
}

// SendDurable queues a message in the Outbox, where it outlives a stop or
// a crash, and wakes the sender; without an Outbox it is Send. msg must
// carry no credential (the row is plain text in the database).
func (m *Mailer) SendDurable(ctx context.Context, msg *Message) error {
	if m.durable == nil {
		return m.Send(msg)
	}
	if err := m.opts.Outbox.Add(ctx, msg); err != nil {
		return err
	}
	m.durable.Wake()
	return nil
}

// Wake tells the mailer that a durable message was queued (by any
// replica's SendDurable it is woken itself; the others poll).
func (m *Mailer) Wake() {
	if m.durable != nil {
		m.durable.Wake()
	}
}

// RunDue sends the durable messages due now, once each (tests; the
// background loop does the same).
func (m *Mailer) RunDue(ctx context.Context) (int, error) {
	if m.durable == nil {
		return 0, nil
	}
	return m.durable.RunDue(ctx)
}

// replyCode is the SMTP reply code of a failed attempt, 0 without one.
func replyCode(err error) int {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}

// permanentReply: a 5xx reply (no such mailbox, message refused) will be
// the same on the next attempt; a 4xx says try later.
func permanentReply(code int) bool { return code >= 500 && code < 600 }

// Send queues a message. It does not wait for the server.
func (m *Mailer) Send(msg *Message) error {
	switch err := m.queue.Send(msg); {
	case errors.Is(err, retryqueue.ErrFull):
		return ErrQueueFull
	case err != nil:
		return errors.New("mailer closed")
	}
	return nil
}

// Close stops the mailer once what is queued in memory has been tried, or
// when ctx ends; a durable message being sent then is cut short and stays
// in the Outbox for the next start (or another replica).
func (m *Mailer) Close(ctx context.Context) {
	if m.durable != nil {
		m.durable.Close(ctx)
	}
	m.queue.Close(ctx)
}

// try sends msg once for the queue, which retries it until it is sent or
// out of attempts.
func (m *Mailer) try(msg *Message, n int, last bool) bool {
	err := m.sendOnce(context.Background(), msg)
	switch {
	case err == nil:
		m.opts.Logger.Info("mail sent", "kind", msg.Kind, "attempts", n)
	case !last:
		m.opts.Logger.Warn("mail not sent; retrying", "kind", msg.Kind, "attempt", n, "err", err)
		return false
	default:
		m.opts.Logger.Error("mail not sent", "kind", msg.Kind, "attempts", n, "err", err)
	}
	if m.opts.Done != nil {
		m.opts.Done(Result{Kind: msg.Kind, Ref: msg.Ref, To: msg.To, Attempts: n, Err: err})
	}
	return true
}

// sendOnce makes one SMTP transaction; ctx ending cuts it short (the
// connection is closed), as Close's deadline does.
func (m *Mailer) sendOnce(ctx context.Context, msg *Message) error {
	to, err := mail.ParseAddress(msg.To)
	if err != nil {
		return fmt.Errorf("recipient is not an address: %w", err)
	}
	body, err := m.compose(msg, to)
	if err != nil {
		return err
	}
	srv := m.opts.Server
	host, _, _ := net.SplitHostPort(srv.Host)
	tlsConf := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if srv.TLSConfig != nil {
		tlsConf = srv.TLSConfig.Clone()
		if tlsConf.ServerName == "" {
			tlsConf.ServerName = host
		}
	}
	d := net.Dialer{Timeout: m.opts.Timeout}
	var conn net.Conn
	if srv.ImplicitTLS {
		conn, err = (&tls.Dialer{NetDialer: &d, Config: tlsConf}).DialContext(ctx, "tcp", srv.Host)
	} else {
		conn, err = d.DialContext(ctx, "tcp", srv.Host)
	}
	if err != nil {
		return fmt.Errorf("connect to mail server: %w", err)
	}
	defer conn.Close()
	defer context.AfterFunc(ctx, func() { _ = conn.Close() })()
	_ = conn.SetDeadline(time.Now().Add(m.opts.Timeout))
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return fmt.Errorf("greet mail server: %w", err)
	}
	defer c.Close()
	if err := c.Hello("localhost"); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	if !srv.ImplicitTLS {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(tlsConf); err != nil {
				return fmt.Errorf("starttls: %w", err)
			}
		} else if !isLoopback(host) {
			// The links in our mail are credentials: never send them in the
			// clear because a server (or someone in between) left TLS out.
			return errors.New("mail server does not offer STARTTLS")
		}
	}
	if srv.User != "" {
		// PlainAuth itself refuses to send the password unencrypted except
		// to localhost.
		if err := c.Auth(smtp.PlainAuth("", srv.User, srv.Password.Reveal(), host)); err != nil {
			return fmt.Errorf("auth: %w", err)
		}
	}
	if err := c.Mail(m.from.Address); err != nil {
		return fmt.Errorf("mail from: %w", err)
	}
	if err := c.Rcpt(to.Address); err != nil {
		return fmt.Errorf("rcpt to: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if _, err := w.Write(body); err != nil {
		return fmt.Errorf("write message: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("end message: %w", err)
	}
	return c.Quit()
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// compose builds a multipart/alternative message. Every header value comes
// from a parsed address or our own subject, so none can carry a line break.
func (m *Mailer) compose(msg *Message, to *mail.Address) ([]byte, error) {
	var b bytes.Buffer
	boundary := randHex(12)
	h := textproto.MIMEHeader{}
	h.Set("From", m.from.String())
	h.Set("To", to.String())
	h.Set("Subject", mime.QEncoding.Encode("utf-8", msg.Subject))
	h.Set("Date", time.Now().UTC().Format(time.RFC1123Z))
	h.Set("Message-ID", "<"+randHex(16)+"@"+domainOf(m.from.Address)+">")
	h.Set("MIME-Version", "1.0")
	h.Set("Content-Type", `multipart/alternative; boundary="`+boundary+`"`)
	for _, k := range []string{"From", "To", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type"} {
		fmt.Fprintf(&b, "%s: %s\r\n", k, h.Get(k))
	}
	b.WriteString("\r\n")
	for _, part := range []struct{ ct, body string }{{"text/plain", msg.Text}, {"text/html", msg.HTML}} {
		fmt.Fprintf(&b, "--%s\r\nContent-Type: %s; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n", boundary, part.ct)
		qp := quotedprintable.NewWriter(&b)
		if _, err := qp.Write([]byte(strings.ReplaceAll(part.body, "\n", "\r\n"))); err != nil {
			return nil, err
		}
		if err := qp.Close(); err != nil {
			return nil, err
		}
		b.WriteString("\r\n")
	}
	fmt.Fprintf(&b, "--%s--\r\n", boundary)
	return b.Bytes(), nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func domainOf(addr string) string {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		return addr[i+1:]
	}
	return "localhost"
}
