package api_test

import (
	"net/http"
	"testing"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/api"
)

func TestSessions_API(t *testing.T) {
	ts := newTestServer(t, api.Options{})
	c := ts.newClient(t)
	c.mustSignup("sam@example.com")
	other := ts.newClient(t)
	other.mustLogin("sam@example.com")
	eve := ts.newClient(t)
	eve.mustSignup("eve@example.com")

	var got struct {
		Sessions []mcpgate.Session `json:"sessions"`
	}
	c.do("GET", "/api/v1/me/sessions", nil).wantStatus(t, http.StatusOK).decode(t, &got)
	if len(got.Sessions) != 2 {
		t.Fatalf("sessions = %+v, want 2", got.Sessions)
	}
	var current, otherID string
	for _, s := range got.Sessions {
		if s.Current {
			current = s.ID
		} else {
			otherID = s.ID
		}
		if s.Address == "" || s.UserAgent == "" {
			t.Errorf("session %+v lacks where it was made", s)
		}
	}
	if current == "" || otherID == "" {
		t.Fatalf("sessions = %+v, want one current", got.Sessions)
	}
	// Eve cannot end Sam's session: it does not exist for her.
	eve.do("DELETE", "/api/v1/me/sessions/"+otherID, nil).wantStatus(t, http.StatusNotFound)
	other.mustMe()
	// Without the CSRF header: refused.
	c.send(c.newRequest("DELETE", "/api/v1/me/sessions/"+otherID, nil)).wantStatus(t, http.StatusForbidden)
	c.do("DELETE", "/api/v1/me/sessions/"+otherID, nil).wantStatus(t, http.StatusNoContent)
	other.do("GET", "/api/v1/me", nil).wantStatus(t, http.StatusUnauthorized)
	c.mustMe()

	other.mustLogin("sam@example.com")
	var ended map[string]int
	c.do("DELETE", "/api/v1/me/sessions", nil).wantStatus(t, http.StatusOK).decode(t, &ended)
	if ended["ended"] != 1 {
		t.Fatalf("ended = %v, want 1", ended)
	}
	other.do("GET", "/api/v1/me", nil).wantStatus(t, http.StatusUnauthorized)
	c.mustMe()
	eve.mustMe()
}
