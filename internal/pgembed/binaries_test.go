package pgembed

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBinDir makes a directory whose pg_ctl reports the given major version.
func fakeBinDir(t *testing.T, major string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range serverBinaries {
		script := "#!/bin/sh\necho '" + name + " (PostgreSQL) " + major + ".3'\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestFindBinaries(t *testing.T) {
	v16, v15 := fakeBinDir(t, "16"), fakeBinDir(t, "15")
	incomplete := fakeBinDir(t, "17")
	if err := os.Remove(filepath.Join(incomplete, "postgres")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		dirs      []string
		wantMajor int
		wantDir   string
		wantErr   string
	}{
		{name: "new cluster takes the first", dirs: []string{incomplete, v16, v15}, wantDir: v16},
		{name: "existing cluster takes its version", dirs: []string{v16, v15}, wantMajor: 15, wantDir: v15},
		{name: "existing cluster without its version", dirs: []string{v16}, wantMajor: 13, wantErr: "created by PostgreSQL 13"},
		{name: "none", dirs: []string{incomplete}, wantErr: "apt-get install postgresql"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := findBinaries(context.Background(), tt.dirs, tt.wantMajor)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("findBinaries() err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got.dir != tt.wantDir {
				t.Fatalf("findBinaries() = %v, %v; want %s", got, err, tt.wantDir)
			}
		})
	}
	if _, err := findBinaries(context.Background(), []string{incomplete}, 0); !errors.Is(err, ErrBinariesNotFound) {
		t.Errorf("findBinaries() err = %v, want ErrBinariesNotFound", err)
	}
}
