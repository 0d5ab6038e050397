// Package e2bsim is a local, in-memory stand-in for E2B's control-plane API
// and the dashboard API's default templates, faithful enough that the E2B
// connector's tests, demos and benchmarks can run against it instead of E2B.
//
// Its answers follow E2B's server code (e2b-dev/infra,
// packages/api/internal/handlers, internal/utils, internal/orchestrator), not
// the OpenAPI file alone and not the connector; where the two disagree the
// code wins, and the handler here names the infra file it follows.
//
// It keeps real state per team (sandboxes that run, pause, resume, expire and
// die, with pausing and killing states that last Options.TransitionDelay;
// templates, builds and snapshots), validates requests the way E2B's OpenAPI
// validator does (400 with E2B's error shape), pages with X-Next-Token, sends
// X-Total-Running, generates logs and metrics (kept for 7 days after a
// sandbox ends), enforces the plan's lifetime limit (Options.MaxLifetime) and
// a per-team concurrency limit (429 without Retry-After, as E2B's), and
// returns the secret fields E2B returns (envd and traffic access tokens,
// network rule header values, egress proxy usernames), so that stripping them
// is tested for real. Faults (latency, failure rate, per-route statuses,
// bodies, delays, resets before or in the middle of a body, oversized
// bodies) can be injected by flag, from a test, or while it runs through the
// control API (ControlHandler), which cmd/e2bsim serves only on a listener
// of its own, so that no E2B route ever behaves differently for it. Every
// response carries X-E2B-Simulator: mcpgate-e2bsim, which real E2B never
// sends.
//
// Expiry is evaluated lazily at each request against the server's clock, so
// a test can move time with ManualClock and needs no goroutine or sleep.
//
// It imports only the standard library: nothing of the gateway.
//
// Imports from this module: none.
package e2bsim
