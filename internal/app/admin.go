package app

import (
	"context"
	"log/slog"

	"github.com/mcpgate/mcpgate/internal/audit"
	"github.com/mcpgate/mcpgate/internal/password"
	"github.com/mcpgate/mcpgate/internal/service"
	"github.com/mcpgate/mcpgate/internal/store"
)

// Operator is the admin service the `mcpgate user` commands run on, with
// an audit writer of its own, as serve's services have. A command ends
// seconds after its change, so Close must be called before it exits: it
// writes what was queued.
type Operator struct {
	*service.Admin
	audit *audit.Writer
}

// NewOperator wires the admin service on db. params are the costs of a new
// password's hash (nil: password.Default; tests lower them).
func NewOperator(db *store.DB, log *slog.Logger, params *password.Params) *Operator {
	// No spool: it is serve's (one process holds it), and a command's few
	// events are written while its change is fresh, or Close says they
	// were not.
	w := audit.New(audit.Options{Sink: db, Logger: log, Writers: 1})
	return &Operator{Admin: service.NewAdmin(service.Options{DB: db, Audit: w, Logger: log, PasswordParams: params}), audit: w}
}

// Close writes every audit event recorded, retrying for a few seconds if
// the database is away, and returns an error if any could not be written.
func (o *Operator) Close(ctx context.Context) error { return o.audit.Close(ctx) }
