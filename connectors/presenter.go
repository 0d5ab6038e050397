package connectors

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate"
)

// Presenter is a connector that tells the dashboard, in its own words, how a
// person connects it and what its guardrail settings mean, so that the
// dashboard names no upstream.
type Presenter interface {
	ConnectGuide() mcpgate.ConnectGuide
	GuardrailLabels() mcpgate.GuardrailLabels
}

// DemoDetector is a connector whose upstream may be a bundled simulator.
type DemoDetector interface {
	// DetectDemo asks the upstream once whether it is the simulator;
	// answered is false when nothing answered, so asking later may tell.
	DetectDemo(ctx context.Context) (demo, answered bool)
}

// Info is what the dashboard shows of c: its names, its resources (Browser)
// and its connect guide and guardrail labels (Presenter), with a generic
// guide for a connector that has none.
func Info(c Connector) mcpgate.ConnectorInfo {
	name := c.Name()
	info := mcpgate.ConnectorInfo{Name: name, Title: name}
	if b, ok := c.(Browser); ok {
		info.Singular, info.Plural, info.Title = b.ResourceNames()
	}
	if p, ok := c.(Presenter); ok {
		info.Connect, info.Guardrails = p.ConnectGuide(), p.GuardrailLabels()
	}
	if info.Connect.Title == "" {
		info.Connect.Title = "Connect " + info.Title
	}
	if info.Connect.Action == "" {
		info.Connect.Action = "Connect " + info.Title
	}
	if info.Connect.Label == "" {
		info.Connect.Label = info.Title + " credential"
	}
	return info
}

// DemoProbe finds out, off the call path, whether a connector's upstream is
// its simulator; pages ask it with On, which never waits.
type DemoProbe struct {
	detector DemoDetector
	on       atomic.Bool
}

// NewDemoProbe returns a probe that asks d when it runs.
func NewDemoProbe(d DemoDetector) *DemoProbe { return &DemoProbe{detector: d} }

// DemoProbes has a probe for each connector of r that can tell its simulator
// from its upstream, by connector name.
func DemoProbes(r *Registry) map[string]*DemoProbe {
	probes := map[string]*DemoProbe{}
	for _, name := range r.Names() {
		c, _ := r.Connector(name)
		if d, ok := c.(DemoDetector); ok {
			probes[name] = NewDemoProbe(d)
		}
	}
	return probes
}

// On reports whether the upstream answered as the simulator.
func (p *DemoProbe) On() bool { return p != nil && p.on.Load() }

// Run asks the connector once. Until something answers (the simulator may start a moment
// after the gateway, as in make demo), it asks again after a growing pause,
// a few times; it returns then or when ctx ends.
func (p *DemoProbe) Run(ctx context.Context) {
	wait := 500 * time.Millisecond
	for range 12 {
		if on, answered := p.detector.DetectDemo(ctx); answered {
			p.on.Store(on)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, 30*time.Second)
	}
}
