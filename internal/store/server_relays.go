package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/mcpgate/mcpgate"
)

// RelaySettings are a server's settings of the requests it may send the
// person's client during a call; nil members are left as they are.
// ElicitationURLHosts is the whole new allow-list, already normalized
// (mcpgate.NormalizeElicitationHosts).
type RelaySettings struct {
	AllowSampling       *bool
	AllowRoots          *bool
	ElicitationURLHosts *[]string
}

// writeRelays applies r to the server's row; the caller's transaction
// notifies the replicas.
func writeRelays(ctx context.Context, tx pgx.Tx, workspaceID, serverID string, r RelaySettings) error {
	var hosts any
	if r.ElicitationURLHosts != nil {
		h := *r.ElicitationURLHosts
		if h == nil {
			h = []string{}
		}
		for _, e := range h {
			if err := mcpgate.ValidateElicitationHost(e); err != nil {
				return err
			}
		}
		if len(h) > mcpgate.MaxElicitationURLHosts {
			return mcpgate.Errorf(mcpgate.EInvalid, "elicitation_url_hosts holds %d hosts, at most %d", len(h), mcpgate.MaxElicitationURLHosts)
		}
		hosts = h
	}
	_, err := tx.Exec(ctx, `UPDATE upstream_servers SET allow_sampling = coalesce($3, allow_sampling),
			allow_roots = coalesce($4, allow_roots), elicitation_url_hosts = coalesce($5::text[], elicitation_url_hosts),
			updated_at = now()
		WHERE workspace_id = $1 AND id = $2`, workspaceID, serverID, r.AllowSampling, r.AllowRoots, hosts)
	return err
}

// RecordElicitationHost counts one URL-mode elicitation of a server that
// named host (in the form mcpgate.ElicitationHostAllowed returns it): a
// new host is added, a known one seen again. At most
// mcpgate.MaxElicitationHostsSeen hosts are kept per server: adding one
// beyond deletes the least recently seen, under a lock per server so that
// two replicas adding at once cannot both stay under the bound and leave
// it exceeded. An unknown server is not_found.
func (db *DB) RecordElicitationHost(ctx context.Context, workspaceID, server, host string) error {
	if err := mcpgate.ValidateElicitationHost(host); err != nil {
		return err
	}
	if !isUUID(workspaceID) {
		return mcpgate.Errorf(mcpgate.ENotFound, "%s", serverNotFound)
	}
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var serverID string
		err := tx.QueryRow(ctx, `SELECT id FROM upstream_servers WHERE workspace_id = $1 AND name = $2`,
			workspaceID, server).Scan(&serverID)
		if err != nil {
			return err
		}
		if err := lockKey(ctx, tx, "upstream_elicitation_hosts|"+serverID); err != nil {
			return err
		}
		var inserted bool
		err = tx.QueryRow(ctx, `
			INSERT INTO upstream_elicitation_hosts (workspace_id, server_id, host) VALUES ($1, $2, $3)
			ON CONFLICT (workspace_id, server_id, host) DO UPDATE SET last_seen = now(),
				times = upstream_elicitation_hosts.times + 1
			RETURNING xmax = 0`, workspaceID, serverID, host).Scan(&inserted)
		if err != nil || !inserted {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM upstream_elicitation_hosts WHERE workspace_id = $1 AND server_id = $2
			AND host NOT IN (SELECT host FROM upstream_elicitation_hosts WHERE workspace_id = $1 AND server_id = $2
				ORDER BY last_seen DESC, host LIMIT $3)`, workspaceID, serverID, mcpgate.MaxElicitationHostsSeen)
		return err
	})
	return mapError(err, serverNotFound)
}

// FindElicitationHosts lists the hosts a server's URL-mode elicitations
// named, the most recently seen first.
func (db *DB) FindElicitationHosts(ctx context.Context, workspaceID, server string) ([]mcpgate.ElicitationHost, error) {
	if !isUUID(workspaceID) {
		return nil, nil
	}
	return listRows(ctx, db, func(r pgx.Row, h *mcpgate.ElicitationHost) error {
		return r.Scan(&h.Host, &h.FirstSeen, &h.LastSeen, &h.Times)
	}, `SELECT h.host, h.first_seen, h.last_seen, h.times FROM upstream_elicitation_hosts h
		JOIN upstream_servers s ON s.id = h.server_id
		WHERE h.workspace_id = $1 AND s.workspace_id = $1 AND s.name = $2 ORDER BY h.last_seen DESC, h.host`,
		workspaceID, server)
}
