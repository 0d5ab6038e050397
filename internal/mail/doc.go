// Package mail sends the gateway's own email: password-reset and
// email-verification links and account notices. It owns the SMTP_URL format,
// the message templates (plain text and HTML, embedded) and a small queue
// that sends off the request path with retries. Messages a person waits on
// (approval mails) can instead wait in an Outbox the caller gives (rows in
// the database, run by internal/outbox), so that a stop or a crash loses
// none; messages carrying a credential (the links) are only ever queued in
// memory. It knows nothing of users,
// tokens or the store: the services render a message and hand it over.
//
// Sending uses the standard library's net/smtp rather than a third-party
// client: it has everything needed (STARTTLS, AUTH PLAIN, implicit TLS through
// NewClient over a tls.Conn), it refuses to send credentials over an
// unencrypted connection except to loopback, and it adds nothing to the
// binary's dependencies. The tests use github.com/emersion/go-smtp only as the
// receiving server (see mailtest).
//
// Imports from this module: internal/outbox, internal/retryqueue, mcpgate.
package mail
