// Package httpx holds what every HTTP front door of the gateway shares: the
// one table from error codes to statuses with the one error body, JSON
// responses, and the client address that limits count against. The JSON API
// and the MCP endpoint both answer through it, so a refusal reads the same
// on either. It imports mcpgate, internal/netguard and the standard library.
//
// Imports from this module: internal/netguard, mcpgate.
package httpx
