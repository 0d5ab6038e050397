// Package outbox runs work that waits in the database between attempts:
// rows every replica shares, so that a stop or a crash loses none. A runner
// claims the due rows for a lease (the Queue does it in one statement, so
// two replicas never make the same attempt), makes each attempt once, and
// records the outcome; a claim whose runner died expires, and another
// takes the row over. Delivery is therefore at least once. Retries wait a
// backoff doubled after each failure, up to a number of attempts; an
// answer that says retrying cannot help ends the row at once.
//
// The webhook sender and the durable mails both run on it; each gives the
// attempt (an HTTP POST, an SMTP transaction) and the Queue over its table.
//
// Imports from this module: none.
package outbox
