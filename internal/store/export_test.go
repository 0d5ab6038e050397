package store

import (
	"time"

	"github.com/mcpgate/mcpgate"
)

// The statements the audit views run, for the plan tests in store_test.

// AuditListQuery is the statement ListAudit runs (f.Limit as given).
func AuditListQuery(workspaceID string, f mcpgate.AuditFilter) (string, []any, error) {
	return auditListQuery(workspaceID, f)
}

// AuditExportQuery is the statement StreamAudit runs.
func AuditExportQuery(workspaceID string, f mcpgate.AuditFilter) (string, []any, error) {
	return auditQuery(workspaceID, f, nil, false, 0)
}

// AuditHourlyQuery is the statement AuditHourly runs.
func AuditHourlyQuery(workspaceID, actorID, source string, since time.Time) (string, []any, error) {
	return auditHourlyQuery(workspaceID, actorID, source, since)
}

// MapError is mapError for the pool tests.
func MapError(err error) error { return mapError(err, "") }
