package pgembed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ErrBinariesNotFound means that no directory holds the PostgreSQL server
// binaries (initdb, pg_ctl, postgres).
var ErrBinariesNotFound = errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: " +
	"install Debian's postgresql package (apt-get install postgresql) or set DATABASE_URL to use an external server")

// debianBinGlob is where Debian and Ubuntu install the server binaries; they
// are not in PATH there (postgresql-common wraps only the client tools).
const debianBinGlob = "/usr/lib/postgresql/*/bin"

// serverBinaries are the programs a bin directory must hold. pg_ctl finds
// postgres next to itself, so all three must live in the same directory.
var serverBinaries = []string{"initdb", "pg_ctl", "postgres"}

// binDir is a directory holding the server binaries, with their major version.
type binDir struct {
	dir   string
	major int
}

func (b binDir) path(name string) string { return filepath.Join(b.dir, name) }

// findBinaries picks the bin directory to run. Candidates are searchDirs when
// given, else the directory of initdb in PATH followed by debianBinGlob. When
// the cluster already exists (wantMajor > 0), only binaries of its major
// version can open it, so that version wins over a newer one; otherwise the
// first PATH hit wins, then the highest version.
func findBinaries(ctx context.Context, searchDirs []string, wantMajor int) (binDir, error) {
	candidates := searchDirs
	if len(candidates) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			candidates = append(candidates, filepath.Dir(p))
		}
		globbed, _ := filepath.Glob(debianBinGlob) // the pattern is constant, so never ErrBadPattern
		sort.Slice(globbed, func(i, j int) bool { return versionOfDebianDir(globbed[i]) > versionOfDebianDir(globbed[j]) })
		candidates = append(candidates, globbed...)
	}

	var found []binDir
	for _, dir := range candidates {
		if !hasServerBinaries(dir) {
			continue
		}
		major, err := binMajorVersion(ctx, filepath.Join(dir, "pg_ctl"))
		if err != nil {
			continue // a broken install; try the next candidate
		}
		found = append(found, binDir{dir: dir, major: major})
	}
	if len(found) == 0 {
		return binDir{}, fmt.Errorf("%w (searched %s)", ErrBinariesNotFound, describeSearch(searchDirs))
	}
	if wantMajor == 0 {
		return found[0], nil
	}
	for _, b := range found {
		if b.major == wantMajor {
			return b, nil
		}
	}
	return binDir{}, fmt.Errorf("the embedded cluster was created by PostgreSQL %d but only PostgreSQL %d binaries were found in %s: "+
		"install Debian's postgresql-%d package, or dump and recreate the cluster", wantMajor, found[0].major, found[0].dir, wantMajor)
}

func describeSearch(searchDirs []string) string {
	if len(searchDirs) > 0 {
		return strings.Join(searchDirs, ", ")
	}
	return "PATH and " + debianBinGlob
}

func hasServerBinaries(dir string) bool {
	for _, name := range serverBinaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// versionOfDebianDir returns N for /usr/lib/postgresql/N/bin, or 0.
func versionOfDebianDir(dir string) float64 {
	v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
	if err != nil {
		return 0
	}
	return v
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// binMajorVersion runs "pg_ctl --version", which prints for example
// "pg_ctl (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)".
func binMajorVersion(ctx context.Context, pgCtl string) (int, error) {
	out, err := exec.CommandContext(ctx, pgCtl, "--version").Output()
	if err != nil {
		return 0, fmt.Errorf("%s --version: %w", pgCtl, err)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("%s --version: unexpected output %q", pgCtl, bytes.TrimSpace(out))
	}
	return strconv.Atoi(string(m[1]))
}

// clusterMajorVersion reads PGDATA/PG_VERSION; 0 means no cluster yet.
func clusterMajorVersion(pgData string) (int, error) {
	b, err := os.ReadFile(filepath.Join(pgData, "PG_VERSION"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read cluster version: %w", err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("read cluster version: bad PG_VERSION %q", bytes.TrimSpace(b))
	}
	return v, nil
}
