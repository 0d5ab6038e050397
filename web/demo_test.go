package web

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate"
	"github.com/mcpgate/mcpgate/internal/e2bsim"
)

func TestConnections_SaysDemoMode(t *testing.T) {
	for _, demo := range []bool{false, true} {
		f := newFake(mcpgate.RoleOwner)
		h, err := newHandler(Options{Services: f.services(), Logger: slog.New(slog.DiscardHandler), PublicURL: "http://localhost:8080",
			Now: func() time.Time { return testNow }, Demo: func() bool { return demo }})
		if err != nil {
			t.Fatal(err)
		}
		_, body := get(t, h, "/app/w/ws1/connections", testUser)
		if got := strings.Contains(body, `id="demo-notice"`) && strings.Contains(body, "simulator"); got != demo {
			t.Errorf("demo %v: connections page shows the demo notice: %v", demo, got)
		}
		if _, body := get(t, h, "/app/w/ws1/keys", testUser); strings.Contains(body, `id="demo-notice"`) {
			t.Errorf("demo notice on the keys page")
		}
	}
}

func TestDemoProbe_SimulatorsHeader(t *testing.T) {
	if SimulatorHeader != e2bsim.SimulatorHeader || SimulatorValue != e2bsim.SimulatorHeaderValue {
		t.Fatalf("web looks for %s: %s, the simulator sends %s: %s", SimulatorHeader, SimulatorValue,
			e2bsim.SimulatorHeader, e2bsim.SimulatorHeaderValue)
	}
	sim := httptest.NewServer(e2bsim.New(e2bsim.Options{}))
	defer sim.Close()
	var p DemoProbe
	p.Run(context.Background(), nil, sim.URL)
	if !p.On() {
		t.Errorf("probe of the real simulator: On() = false")
	}
}

func TestDemoProbe(t *testing.T) {
	sim := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(SimulatorHeader, SimulatorValue)
		http.Error(w, "unauthorized", http.StatusUnauthorized) // any answer counts
	}))
	defer sim.Close()
	real := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(SimulatorHeader, "something else")
	}))
	defer real.Close()

	var p DemoProbe
	p.Run(context.Background(), nil, sim.URL+"/")
	if !p.On() {
		t.Errorf("probe of the simulator: On() = false")
	}
	var q DemoProbe
	q.Run(context.Background(), nil, real.URL)
	if q.On() {
		t.Errorf("probe of a server without the simulator's header: On() = true")
	}
	var nilProbe *DemoProbe
	if nilProbe.On() {
		t.Errorf("nil probe On() = true")
	}

	// A simulator that starts after the gateway is found on a retry.
	var up atomic.Bool
	late := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			hj, _ := w.(http.Hijacker)
			c, _, _ := hj.Hijack()
			_ = c.Close() // no answer yet
			return
		}
		w.Header().Set(SimulatorHeader, SimulatorValue)
	}))
	defer late.Close()
	time.AfterFunc(700*time.Millisecond, func() { up.Store(true) })
	var r DemoProbe
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r.Run(ctx, nil, late.URL)
	if !r.On() {
		t.Errorf("probe of a simulator that answers late: On() = false")
	}
}
