// Package lastused records when credentials (MCP keys, OAuth grants) were
// last used without putting a database write on the call path: a call marks
// its credential in memory, and a background loop writes the marks in one
// batch every few seconds and once more at Close. It imports only the
// standard library.
//
// Imports from this module: none.
package lastused
