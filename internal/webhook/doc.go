// Package webhook sends signed HTTP POSTs to a URL a workspace admin gave
// (approval events): it owns the URL rule (https, or a network named in
// UPSTREAM_PRIVATE_NETWORKS), the dialer that holds every connection to it,
// the signature (X-Mcpgate-Signature: sha256=<hex HMAC-SHA256 of the body>)
// and a small queue that delivers off the request path, with a timeout, no
// redirects followed and retries with backoff. It knows nothing of
// approvals or the store: the services render the body and hear back each
// attempt's outcome (Options.Done), as internal/mail does for email.
//
// Imports from this module: internal/netguard, internal/retryqueue, mcpgate.
package webhook
