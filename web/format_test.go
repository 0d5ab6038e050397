package web

import (
	"testing"
	"time"
)

func TestTimeAgo_Rounds(t *testing.T) {
	now := testNow
	tests := []struct {
		d    time.Duration // t - now
		want string
	}{
		// A key created "in 90 days" and shown a moment later.
		{90*24*time.Hour - 5*time.Second, "in 90 days"},
		{90*24*time.Hour - 3*time.Minute, "in 90 days"},
		{7*24*time.Hour - time.Second, "in 7 days"},
		{365*24*time.Hour - time.Second, "in 365 days"},
		{2*time.Hour - 10*time.Second, "in 2 h"},
		{60*time.Minute - 10*time.Second, "in 1 h"},
		{30 * time.Second, "in <1 min"},
		{-30 * time.Second, "just now"},
		{-89 * time.Second, "1 min ago"},
		{-150 * time.Second, "3 min ago"},
		{-47 * time.Hour, "47 h ago"},
		{-(48*time.Hour - time.Minute), "2 days ago"},
		{-(3*24*time.Hour + 11*time.Hour), "3 days ago"},
		{-(3*24*time.Hour + 13*time.Hour), "4 days ago"},
	}
	for _, tt := range tests {
		if got := timeAgo(now, now.Add(tt.d)); got != tt.want {
			t.Errorf("timeAgo(now, now%+v) = %q, want %q", tt.d, got, tt.want)
		}
	}
	if got := timeAgo(now, time.Time{}); got != "—" {
		t.Errorf("timeAgo(zero) = %q, want —", got)
	}
}
