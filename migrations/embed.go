// Package migrations holds the goose SQL migrations, embedded so that the one
// binary carries its schema. Applied with goose's Provider API by
// internal/store (at start-up under an advisory lock, and by `mcpgate migrate`).
//
// Imports from this module: none.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
