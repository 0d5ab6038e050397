package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/vault"
)

const serverNotFound = "no upstream server of that name in this workspace"

// UpstreamServer is an upstream MCP server as stored: what the API shows
// (Server; its tool counts and tools are the caller's to fill in), with
// what the last discovery found besides the tools.
type UpstreamServer struct {
	ID string
	mcpgate.Server
	// Init is the initialize (or server/discover) result as given.
	Init json.RawMessage
	// Prompts, Resources and ResourceTemplates are JSON arrays of the
	// definitions, as given.
	Prompts, Resources, ResourceTemplates json.RawMessage
	// OAuth says the server signs in with OAuth (it has an
	// upstream_server_oauth row): read with the row, so that the call
	// path, which caches the row, need not ask for each call.
	OAuth bool
}

// UpstreamTool is one row of a server's tool catalog: the routing table's
// entry (ExposedName to the server and Name) with the tool's policy and
// the trust an admin put in its definition.
type UpstreamTool struct {
	Name string
	// Definition is the definition in force, as the server gave it; while
	// Quarantined, Pending is the changed one waiting for an admin.
	Definition json.RawMessage
	Pending    json.RawMessage
	// ExposedName is "" when the tool has no name on the workspace
	// endpoint; NameProblem then says why.
	ExposedName string
	Alias       string
	NameProblem string
	Enabled     bool
	Approval    mcpgate.Approval
	// Pin is the pin of the definition an admin trusted ("" for none).
	Pin         string
	Quarantined bool
	Listed      bool
	Hints       mcpgate.ToolHints
}

// ServerState is what a change of one server is decided on, read under the
// workspace's server lock.
type ServerState struct {
	// Server is nil when the workspace has no server of the name.
	Server *UpstreamServer
	Tools  []UpstreamTool
	// Taken are the exposed names the workspace's other servers hold.
	Taken []string
}

// ServerWrite is what to store of one server.
type ServerWrite struct {
	Server UpstreamServer
	// Headers, unless KeepHeaders, replace the credential; none removes it.
	Headers     map[string]mcpgate.Secret
	KeepHeaders bool
	// Tools, unless KeepTools, replace the catalog: rows not in it go.
	Tools     []UpstreamTool
	KeepTools bool
	// NextCheckAt, when set, is when the monitor next checks the server
	// (a discovery that stored a catalog sets the next re-discovery).
	NextCheckAt *time.Time
	// Relays, when set, changes what the server's requests to the
	// client may be relayed (in the write's transaction, so that the
	// invalidation it sends covers them); nil keeps them. Not for a new
	// server, which starts with none.
	Relays *RelaySettings
	// ActorID is who made the change.
	ActorID string
}

// ChangeServer runs plan under the workspace's server lock, in one
// transaction with the write it returns: the state a change is decided on
// cannot change before it is stored, on any replica. A nil write stores
// nothing. Every statement is scoped by the workspace.
func (db *DB) ChangeServer(ctx context.Context, sealer Sealer, workspaceID, name string, plan func(*ServerState) (*ServerWrite, error)) error {
	if !isUUID(workspaceID) {
		return mcpgate.Errorf(mcpgate.ENotFound, "%s", wsNotFound)
	}
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockKey(ctx, tx, "upstream_servers|"+workspaceID); err != nil {
			return err
		}
		st, err := readServerState(ctx, tx, workspaceID, name)
		if err != nil {
			return err
		}
		w, err := plan(st)
		if err != nil || w == nil {
			return err
		}
		if w.Server.Name != name {
			return fmt.Errorf("change server %q: the write names %q", name, w.Server.Name)
		}
		id, err := writeServer(ctx, tx, workspaceID, st.Server, w)
		if err != nil {
			return err
		}
		if w.Relays != nil && st.Server != nil {
			if err := writeRelays(ctx, tx, workspaceID, id, *w.Relays); err != nil {
				return err
			}
		}
		if !w.KeepHeaders {
			if err := writeHeaders(ctx, tx, sealer, workspaceID, id, w.Headers); err != nil {
				return err
			}
		}
		if !w.KeepTools {
			if err := writeTools(ctx, tx, workspaceID, id, w.ActorID, w.Tools); err != nil {
				return err
			}
		}
		// The tool policy every replica caches holds the catalog and the
		// sealed credential: a change drops it everywhere, at commit.
		return notify(ctx, tx, InvalidatePolicy, workspaceID)
	})
	var coded *mcpgate.Error
	if errors.As(err, &coded) {
		return err // the plan's own answer
	}
	if mcpgate.ErrorCode(mapError(err, "")) == mcpgate.EConflict {
		return &mcpgate.Error{Code: mcpgate.EConflict, Err: err,
			Message: "another change of this workspace's servers took the same name at the same time; try again"}
	}
	return mapError(err, wsNotFound)
}

const serverColumns = `s.id, s.name, s.url, s.header_hints, s.enabled, s.health, s.last_error, s.last_discovered_at,
	s.protocol_version, s.init, s.prompts, s.resources, s.resource_templates, s.created_at, s.updated_at, s.session_scope,
	s.down_since, s.next_check_at, s.allow_sampling, s.allow_roots, s.elicitation_url_hosts,
	EXISTS (SELECT 1 FROM upstream_server_oauth o WHERE o.id = s.id)`

func scanServer(r pgx.Row, s *UpstreamServer) error {
	var hints []byte
	var init []byte
	if err := r.Scan(&s.ID, &s.Name, &s.URL, &hints, &s.Enabled, &s.Health, &s.LastError, &s.LastDiscoveredAt,
		&s.ProtocolVersion, &init, &s.Prompts, &s.Resources, &s.ResourceTemplates, &s.CreatedAt, &s.UpdatedAt, &s.SessionScope,
		&s.DownSince, &s.NextCheckAt, &s.AllowSampling, &s.AllowRoots, &s.ElicitationURLHosts, &s.OAuth); err != nil {
		return err
	}
	if s.ElicitationURLHosts == nil {
		s.ElicitationURLHosts = []string{}
	}
	if len(init) > 0 {
		s.Init = init
	}
	s.Headers = []mcpgate.HeaderHint{}
	return json.Unmarshal(hints, &s.Headers)
}

const toolColumns = `t.name, t.definition, t.pending, coalesce(t.exposed_name, ''), t.alias, t.name_problem, t.enabled,
	t.approval, coalesce(t.pin, ''), t.quarantined, t.listed, t.read_only_hint, t.destructive_hint, t.idempotent_hint,
	t.open_world_hint`

func scanTool(r pgx.Row, t *UpstreamTool) error {
	var pending []byte
	err := r.Scan(&t.Name, &t.Definition, &pending, &t.ExposedName, &t.Alias, &t.NameProblem, &t.Enabled, &t.Approval,
		&t.Pin, &t.Quarantined, &t.Listed, &t.Hints.ReadOnly, &t.Hints.Destructive, &t.Hints.Idempotent, &t.Hints.OpenWorld)
	if len(pending) > 0 {
		t.Pending = pending
	}
	return err
}

func readServerState(ctx context.Context, tx pgx.Tx, workspaceID, name string) (*ServerState, error) {
	st := &ServerState{}
	var s UpstreamServer
	err := scanServer(tx.QueryRow(ctx, `SELECT `+serverColumns+` FROM upstream_servers s
		WHERE s.workspace_id = $1 AND s.name = $2`, workspaceID, name), &s)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, err
	default:
		st.Server = &s
		rows, err := tx.Query(ctx, `SELECT `+toolColumns+` FROM upstream_tools t
			WHERE t.workspace_id = $1 AND t.server_id = $2 ORDER BY t.name`, workspaceID, s.ID)
		if err != nil {
			return nil, err
		}
		st.Tools, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (UpstreamTool, error) {
			var t UpstreamTool
			return t, scanTool(r, &t)
		})
		if err != nil {
			return nil, err
		}
	}
	rows, err := tx.Query(ctx, `SELECT t.exposed_name FROM upstream_tools t JOIN upstream_servers s ON s.id = t.server_id
		WHERE t.workspace_id = $1 AND s.workspace_id = $1 AND s.name <> $2 AND t.exposed_name IS NOT NULL ORDER BY 1`,
		workspaceID, name)
	if err != nil {
		return nil, err
	}
	st.Taken, err = pgx.CollectRows(rows, pgx.RowTo[string])
	return st, err
}

func writeServer(ctx context.Context, tx pgx.Tx, workspaceID string, cur *UpstreamServer, w *ServerWrite) (string, error) {
	s := w.Server
	hints := s.Headers
	if hints == nil {
		hints = []mcpgate.HeaderHint{}
	}
	hintJSON, err := json.Marshal(hints)
	if err != nil {
		return "", err
	}
	arr := func(raw json.RawMessage) []byte {
		if len(raw) == 0 {
			return []byte("[]")
		}
		return raw
	}
	var init any
	if len(s.Init) > 0 {
		init = []byte(s.Init)
	}
	health := s.Health
	if health == "" {
		health = mcpgate.HealthOK
	}
	downSince := s.DownSince
	if health == mcpgate.HealthOK {
		downSince = nil
	}
	args := []any{workspaceID, s.Name, s.URL, hintJSON, s.Enabled, string(health), s.LastError, s.LastDiscoveredAt,
		s.ProtocolVersion, init, arr(s.Prompts), arr(s.Resources), arr(s.ResourceTemplates), downSince, w.NextCheckAt}
	var id string
	if cur == nil {
		err = tx.QueryRow(ctx, `
			INSERT INTO upstream_servers (workspace_id, name, url, header_hints, enabled, health, last_error, last_discovered_at,
				protocol_version, init, prompts, resources, resource_templates, down_since, next_check_at, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, coalesce($15::timestamptz, now()), $16)
			RETURNING id`, append(args, nullIfEmpty(w.ActorID))...).Scan(&id)
		return id, err
	}
	err = tx.QueryRow(ctx, `
		UPDATE upstream_servers SET url = $3, header_hints = $4, enabled = $5, health = $6, last_error = $7,
			last_discovered_at = $8, protocol_version = $9, init = $10, prompts = $11, resources = $12,
			resource_templates = $13, down_since = $14, next_check_at = coalesce($15::timestamptz, next_check_at),
			updated_at = now()
		WHERE workspace_id = $1 AND name = $2 RETURNING id`, args...).Scan(&id)
	return id, err
}

// writeHeaders seals the credential headers as one JSON object bound to
// the workspace and the server's row, replacing the stored ones.
func writeHeaders(ctx context.Context, tx pgx.Tx, sealer Sealer, workspaceID, serverID string, h map[string]mcpgate.Secret) error {
	if _, err := tx.Exec(ctx, `DELETE FROM upstream_server_headers WHERE workspace_id = $1 AND id = $2`, workspaceID, serverID); err != nil {
		return err
	}
	if len(h) == 0 {
		return nil
	}
	plain := make(map[string]string, len(h))
	for k, v := range h {
		plain[k] = v.Reveal()
	}
	pt, err := json.Marshal(plain)
	if err != nil {
		return err
	}
	ct, term, err := seal(sealer, pt, vault.UpstreamHeadersAAD(workspaceID, serverID), "server headers")
	clear(pt)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO upstream_server_headers (id, workspace_id, sealed, key_term) VALUES ($1, $2, $3, $4)`,
		serverID, workspaceID, ct, term)
	return err
}

// writeTools replaces the server's catalog with tools. Names are freed
// first, so that a name moving between two tools of the server in one
// change does not meet itself in the unique index.
func writeTools(ctx context.Context, tx pgx.Tx, workspaceID, serverID, actorID string, tools []UpstreamTool) error {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	if _, err := tx.Exec(ctx, `DELETE FROM upstream_tools WHERE workspace_id = $1 AND server_id = $2 AND NOT (name = ANY($3))`,
		workspaceID, serverID, names); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE upstream_tools SET exposed_name = NULL WHERE workspace_id = $1 AND server_id = $2`,
		workspaceID, serverID); err != nil {
		return err
	}
	for _, t := range tools {
		var pending any
		if len(t.Pending) > 0 {
			pending = []byte(t.Pending)
		}
		approval := t.Approval
		if approval == "" {
			approval = mcpgate.ApprovalNone
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO upstream_tools (workspace_id, server_id, name, definition, pending, exposed_name, alias, name_problem,
				enabled, approval, pin, quarantined, listed, read_only_hint, destructive_hint, idempotent_hint, open_world_hint,
				updated_by, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, now())
			ON CONFLICT (server_id, name) DO UPDATE SET definition = EXCLUDED.definition, pending = EXCLUDED.pending,
				exposed_name = EXCLUDED.exposed_name, alias = EXCLUDED.alias, name_problem = EXCLUDED.name_problem,
				enabled = EXCLUDED.enabled, approval = EXCLUDED.approval, pin = EXCLUDED.pin,
				quarantined = EXCLUDED.quarantined, listed = EXCLUDED.listed, read_only_hint = EXCLUDED.read_only_hint,
				destructive_hint = EXCLUDED.destructive_hint, idempotent_hint = EXCLUDED.idempotent_hint,
				open_world_hint = EXCLUDED.open_world_hint, updated_by = EXCLUDED.updated_by, updated_at = now()`,
			workspaceID, serverID, t.Name, []byte(t.Definition), pending, nullIfEmpty(t.ExposedName), t.Alias, t.NameProblem,
			t.Enabled, string(approval), nullIfEmpty(t.Pin), t.Quarantined, t.Listed, t.Hints.ReadOnly, t.Hints.Destructive,
			t.Hints.Idempotent, t.Hints.OpenWorld, nullIfEmpty(actorID)); err != nil {
			return err
		}
	}
	return nil
}

// FindServers lists a workspace's servers by name, without their tools.
func (db *DB) FindServers(ctx context.Context, workspaceID string) ([]UpstreamServer, error) {
	if !isUUID(workspaceID) {
		return nil, nil
	}
	return listRows(ctx, db, scanServer, `SELECT `+serverColumns+` FROM upstream_servers s WHERE s.workspace_id = $1 ORDER BY s.name`,
		workspaceID)
}

// FindServer returns one server of a workspace.
func (db *DB) FindServer(ctx context.Context, workspaceID, name string) (*UpstreamServer, error) {
	if !isUUID(workspaceID) {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "%s", serverNotFound)
	}
	var s UpstreamServer
	err := scanServer(db.Pool.QueryRow(ctx, `SELECT `+serverColumns+` FROM upstream_servers s
		WHERE s.workspace_id = $1 AND s.name = $2`, workspaceID, name), &s)
	if err != nil {
		return nil, mapError(err, serverNotFound)
	}
	return &s, nil
}

// FindServerTools returns the tools of one server of a workspace, or of
// every server when server is "", each with its server's name.
func (db *DB) FindServerTools(ctx context.Context, workspaceID, server string) ([]ServerToolRoute, error) {
	if !isUUID(workspaceID) {
		return nil, nil
	}
	return listRows(ctx, db, func(r pgx.Row, t *ServerToolRoute) error {
		var pending []byte
		err := r.Scan(&t.Server, &t.ServerEnabled, &t.Name, &t.Definition, &pending, &t.ExposedName, &t.Alias, &t.NameProblem,
			&t.Enabled, &t.Approval, &t.Pin, &t.Quarantined, &t.Listed, &t.Hints.ReadOnly, &t.Hints.Destructive,
			&t.Hints.Idempotent, &t.Hints.OpenWorld)
		if len(pending) > 0 {
			t.Pending = pending
		}
		return err
	}, `SELECT s.name, s.enabled, `+toolColumns+` FROM upstream_tools t JOIN upstream_servers s ON s.id = t.server_id
		WHERE t.workspace_id = $1 AND s.workspace_id = $1 AND ($2 = '' OR s.name = $2) ORDER BY s.name, t.name`,
		workspaceID, server)
}

// ServerToolRoute is a tool with the server it belongs to: a row of the
// workspace's routing table.
type ServerToolRoute struct {
	Server        string
	ServerEnabled bool
	UpstreamTool
}

// OpenServerHeaders returns a server's credential headers in plain text
// for one exchange (none when it has none). The row is read and the
// connection released before the headers are opened.
func (db *DB) OpenServerHeaders(ctx context.Context, sealer Sealer, workspaceID, name string) (map[string]mcpgate.Secret, error) {
	if !isUUID(workspaceID) {
		return nil, mcpgate.Errorf(mcpgate.ENotFound, "%s", serverNotFound)
	}
	var c SealedHeaders
	err := db.Pool.QueryRow(ctx, `SELECT s.id, h.sealed FROM upstream_servers s
		LEFT JOIN upstream_server_headers h ON h.id = s.id AND h.workspace_id = $1
		WHERE s.workspace_id = $1 AND s.name = $2`, workspaceID, name).Scan(&c.ServerID, &c.Sealed)
	if err != nil {
		return nil, mapError(err, serverNotFound)
	}
	return c.Open(ctx, sealer, workspaceID)
}

// SealedHeaders is a server's credential as stored, sealed: what a cache
// may keep (never the plain text).
type SealedHeaders struct {
	ServerID string
	Sealed   []byte // nil: the server takes no credential
}

// FindSealedServerHeaders returns the sealed credential of every server of
// a workspace, by server name.
func (db *DB) FindSealedServerHeaders(ctx context.Context, workspaceID string) (map[string]SealedHeaders, error) {
	out := map[string]SealedHeaders{}
	if !isUUID(workspaceID) {
		return out, nil
	}
	rows, err := db.Pool.Query(ctx, `SELECT s.name, s.id, h.sealed FROM upstream_servers s
		LEFT JOIN upstream_server_headers h ON h.id = s.id AND h.workspace_id = $1
		WHERE s.workspace_id = $1`, workspaceID)
	if err != nil {
		return nil, mapError(err, "")
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var c SealedHeaders
		if err := rows.Scan(&name, &c.ServerID, &c.Sealed); err != nil {
			return nil, mapError(err, "")
		}
		out[name] = c
	}
	return out, mapError(rows.Err(), "")
}

// Open returns the headers in plain text for one exchange (none when the
// server takes none).
func (c SealedHeaders) Open(ctx context.Context, sealer Sealer, workspaceID string) (map[string]mcpgate.Secret, error) {
	if c.Sealed == nil {
		return nil, nil
	}
	pt, err := sealer.OpenContext(ctx, c.Sealed, vault.UpstreamHeadersAAD(workspaceID, c.ServerID))
	if err != nil {
		return nil, fmt.Errorf("open server headers: %w", err)
	}
	defer clear(pt)
	var plain map[string]string
	if err := json.Unmarshal(pt, &plain); err != nil {
		return nil, errors.New("open server headers: the sealed value is not a JSON object")
	}
	h := make(map[string]mcpgate.Secret, len(plain))
	for k, v := range plain {
		h[k] = mcpgate.Secret(v)
	}
	return h, nil
}

// DeleteServer removes a server, its credential and its tools.
func (db *DB) DeleteServer(ctx context.Context, workspaceID, name string) error {
	if !isUUID(workspaceID) {
		return mcpgate.Errorf(mcpgate.ENotFound, "%s", serverNotFound)
	}
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockKey(ctx, tx, "upstream_servers|"+workspaceID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM upstream_servers WHERE workspace_id = $1 AND name = $2`, workspaceID, name)
		if err == nil && tag.RowsAffected() == 0 {
			err = pgx.ErrNoRows
		}
		if err != nil {
			return err
		}
		return notify(ctx, tx, InvalidatePolicy, workspaceID)
	})
	return mapError(err, serverNotFound)
}
