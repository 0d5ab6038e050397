// Package limiter holds the gateway's in-memory rate limits: token buckets
// by name (a credential, a person, a workspace, a client address), each
// forgotten once idle, and optionally shared out among the replicas that
// serve one deployment. The MCP endpoint limits tool calls per credential,
// person and workspace and failed authentications per address with them;
// the OAuth server limits registrations and metadata-document fetches per
// address. What is limited, in what order, and how a refusal is worded stay
// with those callers: this package only counts.
//
// # Shared across replicas
//
// A limit meant for the whole deployment (Options.Replicas set) is split:
// each replica holds its share of every bucket, the rate divided by the
// replica count and the burst too (rounded down, at least one call), so the
// replicas together never allow more than is configured. A change in the
// count re-shares a bucket at its next use and keeps what it has spent, so a
// replica joining mid-burst hands out no fresh burst. The count is read from
// memory (internal/replicas keeps it); nothing here touches the network.
//
// # Why the database throttles are not here
//
// Failed logins, sign-ups per address and the mail throttle are counted in
// PostgreSQL (internal/store's CountAttempt, CountAttempts and the login
// failure counters) and decided in internal/service. They do not share this
// API, and forcing them into it would make both worse: a bucket here is
// synchronous, cannot fail and costs nanoseconds on the hot path of every
// tool call, while those are fixed windows read and written in one SQL
// statement (so parallel requests on every replica are counted one after
// the other), take a context and can fail with the database. What is left
// of them once the statement is in the store is policy: the login throttle
// counts failures only and checks before the password is tried, and its
// per-email ceiling spares addresses that have not been failing; the mail
// throttle counts every request, whether or not a mail follows, against
// several limits at once. That policy belongs beside the accounts it guards,
// and a wrapper here would be one forwarded call.
//
// Imports from this module: none.
package limiter
