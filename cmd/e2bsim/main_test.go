package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcpgate/mcpgate/internal/e2bsim"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    config
		wantErr bool
	}{
		{name: "defaults", want: config{listen: "127.0.0.1:3001", opts: e2bsim.Options{MaxRunning: 20, Seed: 1}}},
		{name: "all", args: []string{"--listen", ":9", "--team-key", "e2b_aa", "--team-key", "e2b_bb", "--max-running", "3",
			"--latency", "50ms", "--fail-rate", "0.1", "--seed", "7"},
			want: config{listen: ":9", opts: e2bsim.Options{TeamKeys: []string{"e2b_aa", "e2b_bb"}, MaxRunning: 3,
				Latency: 50 * time.Millisecond, FailRate: 0.1, Seed: 7}}},
		{name: "fail rate over 1", args: []string{"--fail-rate", "2"}, wantErr: true},
		{name: "max running 0", args: []string{"--max-running", "0"}, wantErr: true},
		{name: "empty key", args: []string{"--team-key", " "}, wantErr: true},
		{name: "stray argument", args: []string{"serve"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseFlags(tt.args, io.Discard)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseFlags(%q) err = %v, wantErr %v", tt.args, err, tt.wantErr)
			}
			if err == nil {
				if d := cmp.Diff(tt.want, got, cmp.AllowUnexported(config{}), cmpopts.IgnoreFields(e2bsim.Options{}, "Now")); d != "" {
					t.Errorf("parseFlags(%q) (-want +got):\n%s", tt.args, d)
				}
			}
		})
	}
}

func TestRun_shutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0"}, io.Discard, slog.New(slog.DiscardHandler))
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run() err = %v, want a clean shutdown", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run() did not stop")
	}
}
