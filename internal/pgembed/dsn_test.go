package pgembed

import (
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestDSNSurvivesOddPaths(t *testing.T) {
	for _, dir := range []string{"/srv/mcpgate/data/run", "/tmp/a b+c&d=e?f#g/run", "/tmp/ünï'cödé/run"} {
		c := &Cluster{sockDir: dir}
		dsn := c.DSN()
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatalf("pgx.ParseConfig(%q) err = %v", dsn, err)
		}
		if cfg.Host != dir || cfg.Port != port || cfg.User != User || cfg.Database != Database || cfg.TLSConfig != nil {
			t.Errorf("pgx.ParseConfig(%q) = host %q port %d user %q db %q tls %v; want %q %d %q %q no TLS",
				dsn, cfg.Host, cfg.Port, cfg.User, cfg.Database, cfg.TLSConfig != nil, dir, port, User, Database)
		}
		u, err := url.Parse(dsn)
		if err != nil || u.Query().Get("host") != dir {
			t.Errorf("url.Parse(%q) host = %q, err = %v; want %q", dsn, u.Query().Get("host"), err, dir)
		}
	}
}
