// Package e2b is the E2B connector: a typed client for E2B's control-plane
// API (https://api.e2b.app) and for the dashboard API's default templates, and
// the fourteen MCP tools built on it.
//
// The client is shared by every workspace: the team API key travels with each
// call and is never stored. Secrets that E2B returns (envd and traffic access
// tokens, network rule header values, egress proxy credentials) are never
// decoded into memory: the wire types either lack those fields or decode them
// into Withheld, which keeps no value. Tool outputs are built from the wire
// types, so there is nothing secret to leak.
//
// Where E2B's server code and its OpenAPI file disagree, the client follows
// the code (e2b-dev/infra packages/api/internal) and the official SDKs
// (e2b-dev/E2B): the three-level metadata filter, the 404 a timeout change
// gets for a paused sandbox, the silent clamp of end times to the plan's
// maximum lifetime, the 429 without Retry-After of the concurrency limit.
// contract_test.go holds the client, and e2bsim separately, to ports of those
// algorithms.
//
// It imports only connectors, mcpgate and the standard library; never another
// connector, the mcp package, the vault or the store.
//
// Imports from this module: connectors, mcpgate.
package e2b
