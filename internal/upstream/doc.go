// Package upstream is the gateway's client side towards remote MCP servers
// (streamable HTTP) that a workspace adds as connectors.
// The upstream server service (internal/service) discovers servers with
// it, and a server's own MCP endpoint relays its prompts, resources,
// completions and log level with Relay.
//
// What it provides, and why it is built the way it is:
//
//   - Discovery (Pool.Discover): initialize, then tools, prompts,
//     resources and resource templates where the server declares the
//     capability, every page, all of it within one byte budget
//     (MaxAnswerBytes); a tool whose name is outside the spec's pattern,
//     whose definition or description is oversized, or which holds a
//     number float64 cannot carry is invalid. Each definition is kept as the upstream gave
//     it (raw JSON): go-sdk's typed results cannot tell a missing
//     readOnlyHint from false, and drop members they do not model. Tool
//     annotations keep declared apart from unset (nil); the spec's
//     defaults (destructive and open-world true, read-only and idempotent
//     false) come from the methods.
//   - Pinning (Pin, DiffCatalogs): a SHA-256 of the whole definition's
//     RFC 8785 canonical form (every member, _meta and icons included), so an admin approves a definition once and a
//     changed one is noticed; the diff lists new, removed and changed
//     tools and, apart, every hint that now claims less risk.
//   - Exposed names (ExposeNames): "<server>_<tool>" within NameBudget,
//     routed by the table it returns; a name that is too long, invalid or
//     taken needs an admin alias, never a truncation.
//   - Resource subscriptions (Pool.OpenSubscriber): a session outside the
//     pool, with the standalone stream the pool's sessions do without, on
//     which a server endpoint subscribes URIs and hears
//     notifications/resources/updated, through the same hop.
//   - Calls (Pool.Call): the result is relayed byte for byte; a JSON-RPC
//     error becomes *RPCError; the answer is capped while it is read, an
//     idle timeout restarts on each progress notification, and an absolute
//     one ends the call. The gateway sends its own progress token and
//     relays progress to the caller, so tokens of different callers never
//     meet on one upstream session. Log messages sent during a call go to
//     the call's OnLog with their data raw (credential values replaced);
//     the gateway asks a server that declares logging for every level
//     (setLevel debug when a session before 2026-07-28 opens, the _meta
//     level on 2026-07-28) and the caller filters. A log message names no
//     request, but a session carries one call at a time, so a message that
//     arrives while a call holds the session is that call's; one outside a
//     call is dropped.
//   - Sessions: per caller-chosen key (and per URL and credential: a
//     rotated credential opens a new one), each held by one call or relay
//     at a time. A caller takes an idle session of its key (the most
//     recently used), else opens a new one, up to SessionsPerKey (4, or
//     the key's own bound, SessionBounder: 1 for a downstream client's
//     session, whose state lives on one upstream session); past
//     that it waits, under its own context, for the next session given
//     back, and takes it. Callers do not wait for another's opening: a
//     session being opened serves only its opener. A session unused for
//     SessionIdle closes; one the upstream answers 404 for is retired with
//     its key's idle sessions that were open when that request began, and
//     the call repeated once on a new session only if marked safe. A call
//     that fails in any other way than the upstream's JSON-RPC answer
//     retires its session, since go-sdk breaks a connection whose JSON
//     answer was cut short without telling the caller. Close ends the
//     calls in flight. The client declares the requests to the client
//     its target's Capabilities say (none by default): the caller's
//     client's, as far as the server is allowed them, part of the
//     session's fingerprint. With a session per call, a request of the
//     upstream's during a call has one caller to go to: CallRequest's
//     OnRequest, with the call's idle timeout held while it waits
//     (clientrequests.go). Such a session answers 2026-07-28 input
//     requests itself (or passes them to a caller that retries), go-sdk's
//     own loop being off.
//     The 2026-07-28 protocol has no sessions: go-sdk v1.8.0 probes server/discover first, and against
//     a stateless server there is no Mcp-Session-Id and never a 404 to
//     handle; the pooled ClientSession then only saves the probe.
//   - The hop (Network): https only, except to the private networks an
//     operator lists; every dial resolves the host itself, keeps the
//     allowed addresses, connects by address, checks the connected address
//     again in the socket's Control hook and pins it for the session; no
//     redirect is followed, no proxy used. What counts as a public address
//     is the AddrAllowed the wiring passes: the gateway's one table of
//     special-use ranges lives with the OAuth metadata fetcher.
//
// How the raw answers are read: go-sdk's client does the protocol
// (version negotiation, sessions, SSE), and this package wraps its
// connection to copy each JSON-RPC answer's raw result to the request that
// asked, matched by JSON-RPC id through the request's context (the SDK
// passes the caller's context to Write and to the HTTP request). The
// wrapper hides the SDK's unexported session-update hook, whose only use
// with the standalone GET stream off is the MCP-Protocol-Version header,
// which hopTransport therefore sets. The standalone stream stays off: a server's
// requests during a call come on that call's stream, and its
// subscriptions are a Subscriber's. TestGoSDKVersion fails
// when the SDK's version moves, so this reliance is re-checked then.
//
// Credential headers are the only headers sent besides the protocol's
// own (hopTransport drops every other one); their values are
// mcpgate.Secret and are replaced in every error's text, since an upstream
// may echo them back.
//
// Imports from this module: mcpgate.
package upstream
