// Package webhook sends signed HTTP POSTs to a URL a workspace admin gave
// (approval events): it owns the URL rule (https, or a network named in
// UPSTREAM_PRIVATE_NETWORKS), the dialer that holds every connection to it,
// the signature (X-Mcpgate-Signature: sha256=<hex HMAC-SHA256 of the body>)
// and the delivery off the request path, with a timeout, no redirects
// followed and retries with backoff. Deliveries wait in a Queue the caller
// gives (rows in the database, shared by the replicas), never only in
// memory, so that a stop or a crash loses none: a sender claims the due ones
// for a lease, and a claim whose sender died expires for another to take.
// Delivery is therefore at least once; receivers dedupe by
// X-Mcpgate-Delivery. It knows nothing of approvals or the store: the
// services render the body, store it and record each attempt's outcome.
//
// Imports from this module: internal/netguard, internal/outbox, mcpgate.
package webhook
