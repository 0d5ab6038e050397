package web

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate"
)

// Charts are drawn on the server as SVG: numbers only, computed here, so
// the page needs no script and no inline style.

const (
	chartW    = 600.0
	chartH    = 160.0
	chartPadL = 64.0
	chartPadR = 8.0
	chartPadT = 10.0
	chartPadB = 22.0
)

// lineChart is one series over time.
type lineChart struct {
	W, H      float64
	Line      string // polyline points
	Area      string // path for the fill under the line
	Grid      []gridLine
	XLabels   []axisLabel
	Empty     bool
	Latest    string
	LastX     float64
	LastY     float64
	Peak      string
	Unit      string
	Title     string
	Desc      string
	PlotLeft  float64
	PlotRight float64
	PlotBase  float64
}

type gridLine struct {
	Y     float64
	Label string
}

type axisLabel struct {
	X      float64
	Label  string
	Anchor string
}

type point struct {
	t time.Time
	v float64
}

// newLineChart scales points into the chart; yMax is the top of the axis
// (at least the largest value), format labels the axis.
func newLineChart(title string, pts []point, yMax float64, format func(float64) string) *lineChart {
	c := &lineChart{W: chartW, H: chartH, Title: title, PlotLeft: chartPadL, PlotRight: chartW - chartPadR, PlotBase: chartH - chartPadB}
	if len(pts) == 0 {
		c.Empty = true
		return c
	}
	peak := 0.0
	for _, p := range pts {
		peak = math.Max(peak, p.v)
	}
	if yMax < peak {
		yMax = peak
	}
	if yMax <= 0 {
		yMax = 1
	}
	t0, t1 := pts[0].t, pts[len(pts)-1].t
	span := t1.Sub(t0).Seconds()
	plotW, plotH := chartW-chartPadL-chartPadR, chartH-chartPadT-chartPadB
	x := func(t time.Time) float64 {
		if span <= 0 {
			return chartPadL + plotW/2
		}
		return chartPadL + plotW*t.Sub(t0).Seconds()/span
	}
	y := func(v float64) float64 { return chartPadT + plotH*(1-v/yMax) }
	var line strings.Builder
	for i, p := range pts {
		if i > 0 {
			line.WriteByte(' ')
		}
		fmt.Fprintf(&line, "%.1f,%.1f", x(p.t), y(p.v))
	}
	c.Line = line.String()
	base := chartPadT + plotH
	c.Area = fmt.Sprintf("M%.1f,%.1f L%s L%.1f,%.1f Z", x(t0), base, strings.ReplaceAll(c.Line, " ", " L"), x(t1), base)
	for i := 0; i <= 4; i++ {
		v := yMax * float64(i) / 4
		c.Grid = append(c.Grid, gridLine{Y: y(v), Label: format(v)})
	}
	c.XLabels = []axisLabel{{X: chartPadL, Label: t0.UTC().Format("15:04"), Anchor: "start"},
		{X: chartW - chartPadR, Label: t1.UTC().Format("15:04 UTC"), Anchor: "end"}}
	c.LastX, c.LastY = x(t1), y(pts[len(pts)-1].v)
	c.Latest = format(pts[len(pts)-1].v)
	c.Peak = format(peak)
	c.Desc = fmt.Sprintf("%s from %s to %s: latest %s, peak %s", title, t0.UTC().Format("15:04"), t1.UTC().Format("15:04 UTC"), c.Latest, c.Peak)
	return c
}

// barChart is calls and errors per hour.
type barChart struct {
	W, H     float64
	Bars     []bar
	Grid     []gridLine
	XLabels  []axisLabel
	Max      int
	Desc     string
	PlotBase float64
}

type bar struct {
	X, W, Y, H float64
	ErrY, ErrH float64
	Title      string
}

// hourlyChart lays out 24 hourly bars from since; it also returns the
// totals.
func hourlyChart(since time.Time, counts []mcpgate.HourCount) (*barChart, int, int) {
	const hours = 24
	calls, errs := make([]int, hours), make([]int, hours)
	totalCalls, totalErrs := 0, 0
	for _, b := range counts {
		i := int(b.Hour.Sub(since) / time.Hour)
		if i < 0 || i >= hours {
			continue
		}
		calls[i] += b.Calls
		errs[i] += b.Errors
		totalCalls += b.Calls
		totalErrs += b.Errors
	}
	top := 0
	for _, n := range calls {
		top = max(top, n)
	}
	yMax := niceCeil(top)
	c := &barChart{W: chartW, H: chartH, Max: top, PlotBase: chartH - chartPadB}
	plotW, plotH := chartW-chartPadL-chartPadR, chartH-chartPadT-chartPadB
	slot := plotW / hours
	y := func(v int) float64 { return chartPadT + plotH*(1-float64(v)/float64(yMax)) }
	for i := range hours {
		b := bar{X: chartPadL + float64(i)*slot + 2, W: slot - 4, Y: y(calls[i]), ErrY: y(errs[i])}
		b.H = chartPadT + plotH - b.Y
		b.ErrH = chartPadT + plotH - b.ErrY
		hour := since.Add(time.Duration(i) * time.Hour).UTC()
		b.Title = fmt.Sprintf("%s UTC: %d calls, %d failed", hour.Format("15:04"), calls[i], errs[i])
		c.Bars = append(c.Bars, b)
	}
	for i := 0; i <= 2; i++ {
		v := yMax * i / 2
		c.Grid = append(c.Grid, gridLine{Y: y(v), Label: fmt.Sprint(v)})
	}
	for _, i := range []int{0, 6, 12, 18, 23} {
		anchor := "middle"
		if i == 23 {
			anchor = "end"
		}
		c.XLabels = append(c.XLabels, axisLabel{X: chartPadL + float64(i)*slot + slot/2, Label: since.Add(time.Duration(i) * time.Hour).UTC().Format("15:04"), Anchor: anchor})
	}
	c.Desc = fmt.Sprintf("Tool calls per hour over the last 24 hours: %d calls, %d failed", totalCalls, totalErrs)
	return c, totalCalls, totalErrs
}

// niceCeil rounds n up to 2, 4, 10, 20, 40, 100, ... so the axis reads well
// and its midpoint is a whole number.
func niceCeil(n int) int {
	if n <= 2 {
		return 2
	}
	for m := 1; ; m *= 10 {
		for _, s := range []int{2, 4, 10} {
			if n <= s*m {
				return s * m
			}
		}
	}
}
