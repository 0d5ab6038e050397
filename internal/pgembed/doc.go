// Package pgembed runs a private PostgreSQL cluster for mcpgate when no
// DATABASE_URL is configured.
//
// It owns nothing but the cluster's life cycle: it finds the machine's
// PostgreSQL server binaries, runs initdb once, starts and stops the server
// with pg_ctl and hands out a connection string. It must not import other
// mcpgate packages; the caller (cmd/mcpgate) runs migrations on the returned
// DSN like on any other database.
//
// # Layout under DATA_DIR
//
//	DATA_DIR/postgres/      the cluster (PGDATA), created by initdb, mode 0700
//	DATA_DIR/run/           the Unix socket directory, mode 0700
//	DATA_DIR/postgres.log   the server's log (never our stdout)
//	DATA_DIR/postgres.lock  flock held by the Cluster's process while it runs
//
// # Security
//
// The server listens on no TCP address (listen_addresses = ”), only on a Unix
// socket in DATA_DIR/run. initdb configures "trust" for local (socket)
// connections and "reject" for host connections. Trust is safe here because
// the socket directory is mode 0700 and owned by the server's user, so only
// that user and root can reach the socket at all; the kernel does the
// authentication. A generated password would add a secret to manage without
// adding a boundary.
//
// # Running as root
//
// initdb and postgres refuse to run as root. When the process is root, the
// binaries run as the "postgres" system user if it exists, else as "nobody"
// (via SysProcAttr.Credential), and DATA_DIR/postgres, DATA_DIR/run and the log
// file are chowned to that user. Root still connects over the socket because
// it bypasses the directory's permissions. That user must be able to traverse
// every directory above DATA_DIR: Start adds the search bit for others (o+x)
// to DATA_DIR itself, which lists nothing and exposes no file (secrets in
// DATA_DIR are mode 0600), but it does not touch the ancestors; if one of them
// (typically /root, mode 0700) blocks the way, Start fails and names it.
//
// # Concurrency, crashes and signals
//
// Start takes an exclusive flock on DATA_DIR/postgres.lock, so a second
// process (or a second Start in the same process) on the same DATA_DIR gets
// ErrInUse instead of touching the cluster; postgres's own postmaster.pid is a
// second line of defence. The lock is released by Stop, or by the kernel when
// the process dies.
//
// pg_ctl puts the postmaster in its own session (setsid), and Start runs every
// helper in its own process group, so a Ctrl-C that the terminal sends to
// mcpgate's process group does not kill the server behind the caller's back:
// the caller's signal handling calls Stop, which shuts the server down cleanly
// (pg_ctl stop -m fast). If mcpgate itself dies without calling Stop (kill -9,
// a panic), the server keeps running as an orphan. It is not left to run
// unnoticed forever: the next Start on the same DATA_DIR finds it through
// postmaster.pid, adopts it if it answers on the socket, and otherwise stops it
// and starts afresh. A postmaster.pid left behind by a server that was itself
// killed is recognised as stale by pg_ctl and postgres and does not block the
// restart.
//
// The package works on Unix only.
//
// Imports from this module: none.
package pgembed
