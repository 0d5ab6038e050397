package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// axe-core, the accessibility checker the journey runs on every page, at a
// pinned version from the npm registry. The tarball is checked against the
// registry's sha512 integrity before use and cached under .cache/ at the
// repository root, so `make test` needs neither npm nor a second download.
const (
	axeVersion   = "4.14.1"
	axeTarball   = "https://registry.npmjs.org/axe-core/-/axe-core-" + axeVersion + ".tgz"
	axeIntegrity = "sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ=="
)

var webAxeCacheDir = filepath.Join("..", "..", ".cache", "axe-core")

var webAxe = struct {
	once sync.Once
	src  string
	err  error
}{}

// webAxeSource returns axe.min.js, downloading the pinned tarball once.
func webAxeSource(t *testing.T) string {
	t.Helper()
	webAxe.once.Do(func() { webAxe.src, webAxe.err = loadAxe() })
	if webAxe.err != nil {
		t.Fatalf("axe-core %s: %v (the browser test needs it: make sure %s is reachable, or put the tarball at %s)",
			axeVersion, webAxe.err, axeTarball, filepath.Join(webAxeCacheDir, filepath.Base(axeTarball)))
	}
	return webAxe.src
}

func loadAxe() (string, error) {
	path := filepath.Join(webAxeCacheDir, filepath.Base(axeTarball))
	tgz, err := os.ReadFile(path)
	if err != nil || checkIntegrity(tgz) != nil {
		if tgz, err = downloadAxe(); err != nil {
			return "", err
		}
		if err := os.MkdirAll(webAxeCacheDir, 0o755); err != nil {
			return "", err
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, tgz, 0o644); err != nil {
			return "", err
		}
		if err := os.Rename(tmp, path); err != nil {
			return "", err
		}
	}
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return "", err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			return "", fmt.Errorf("package/axe.min.js not in the tarball: %w", err)
		}
		if h.Name == "package/axe.min.js" {
			b, err := io.ReadAll(io.LimitReader(tr, 10<<20))
			return string(b), err
		}
	}
}

func downloadAxe() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, axeTarball, nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", axeTarball, res.Status)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, 50<<20))
	if err != nil {
		return nil, err
	}
	return b, checkIntegrity(b)
}

func checkIntegrity(b []byte) error {
	sum := sha512.Sum512(b)
	if got := "sha512-" + base64.StdEncoding.EncodeToString(sum[:]); got != axeIntegrity {
		return fmt.Errorf("tarball integrity %s, want %s", got, axeIntegrity)
	}
	return nil
}

// webWidths are the widths every page is checked at: a laptop and a phone.
var webWidths = []struct {
	w, h int64
	mob  bool
}{{1280, 900, false}, {390, 844, true}}

// webCheckPage checks the page the browser shows, at each width: no
// horizontal scrolling, no serious or critical axe-core violation, and every
// select wide enough for each option's text. It saves a screenshot per width
// as testoutput/screenshots/<name>-<width>.png and goes back to 1280 px.
func webCheckPage(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	axe := webAxeSource(t)
	loc := webLocation(t, ctx)
	for _, vp := range webWidths {
		var emulate []chromedp.EmulateViewportOption
		if vp.mob {
			emulate = append(emulate, chromedp.EmulateScale(2))
		}
		webRun(t, ctx, fmt.Sprintf("%s at %d px", name, vp.w), chromedp.EmulateViewport(vp.w, vp.h, emulate...))
		at := fmt.Sprintf("%s (%s) at %d px", name, loc, vp.w)
		// Let the layout settle after the resize.
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`,
			chromedp.EvalAwaitPromise)); err != nil {
			t.Fatalf("%s: wait for layout: %v", at, err)
		}
		overflow, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](webOverflowJS))
		if err != nil {
			t.Fatalf("%s: measure overflow: %v", at, err)
		}
		if len(overflow) > 0 {
			t.Errorf("%s scrolls sideways: %s", at, strings.Join(overflow, "; "))
		}
		clipped, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](webClippedSelectJS))
		if err != nil {
			t.Fatalf("%s: measure selects: %v", at, err)
		}
		for _, c := range clipped {
			t.Errorf("%s: select cuts off its text: %s", at, c)
		}
		for _, v := range webRunAxe(t, ctx, axe, at) {
			t.Errorf("%s: axe %s", at, v)
		}
		shot := fmt.Sprintf("%s-%d", name, vp.w)
		if vp.mob {
			webShotViewport(t, ctx, shot)
		} else {
			webShot(t, ctx, shot)
		}
	}
	webRun(t, ctx, "back to 1280 px", chromedp.EmulateViewport(1280, 900))
}

// webOverflowJS lists what sticks out past the right edge when the page is
// wider than the window.
const webOverflowJS = `(() => {
  const de = document.documentElement, w = window.innerWidth - window.scrollX; // rects are relative to the scrolled view
  if (de.scrollWidth <= window.innerWidth) return [];
  const out = ['scrollWidth ' + de.scrollWidth + ' > innerWidth ' + window.innerWidth];
  // Inside a box that clips or scrolls, sticking out is that box's business.
  // An absolutely positioned box (an .sr-only label) escapes the overflow of
  // every ancestor up to its containing block; a fixed one escapes all.
  const clipped = el => {
    let pos = getComputedStyle(el).position;
    if (pos === 'fixed') return false;
    let abs = pos === 'absolute';
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const cs = getComputedStyle(a);
      if (cs.overflowX !== 'visible' && (!abs || cs.position !== 'static')) return true;
      if (abs && cs.position !== 'static') abs = cs.position === 'absolute';
    }
    return false;
  };
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (typeof el.className === 'string' && el.className.trim() ? '.' + el.className.trim().split(/\s+/).join('.') : '') +
    ' "' + (el.textContent || '').trim().slice(0, 30) + '" in ' + (el.parentElement ? el.parentElement.tagName.toLowerCase() + '.' + el.parentElement.className : '');
  const wide = [];
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > w + 1 && !clipped(el)) wide.push([Math.round(r.right), el]);
  }
  wide.sort((a, b) => b[0] - a[0]);
  // Text that does not wrap (a long path) sticks out of its box too.
  const tw = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = tw.nextNode(); n; n = tw.nextNode()) {
    if (!n.textContent.trim() || !n.parentElement || clipped(n.parentElement) && n.parentElement.getBoundingClientRect().right <= w + 1) continue;
    const rg = document.createRange();
    rg.selectNodeContents(n);
    const r = rg.getBoundingClientRect();
    if (r.width > 0 && r.right > w + 1 && !clipped(n.parentElement)) wide.push([Math.round(r.right), n.parentElement]);
  }
  wide.sort((a, b) => b[0] - a[0]);
  for (const [r, el] of wide.slice(0, 6)) out.push(name(el) + ' right=' + r);
  if (wide.length === 0) {
    for (const el of document.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if (r.right > w + 1) out.push('(clipped) ' + name(el) + ' ' + getComputedStyle(el).position + ' right=' + Math.round(r.right));
      if (out.length > 12) break;
    }
  }
  return out;
})()`

// webClippedSelectJS lists visible selects whose chosen option's text is
// wider than the room the select gives it.
const webClippedSelectJS = `(() => {
  const out = [], c = document.createElement('canvas').getContext('2d');
  for (const s of document.querySelectorAll('select')) {
    if (!s.offsetParent || s.selectedIndex < 0) continue;
    const cs = getComputedStyle(s);
    c.font = cs.fontWeight + ' ' + cs.fontSize + ' ' + cs.fontFamily;
    for (const o of s.options) {
      const text = c.measureText(o.text).width;
      const room = s.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 20; // 20 px: the arrow
      if (text > room + 2) out.push('#' + s.id + ' option "' + o.text + '" needs ' + Math.round(text) + ' px, has ' + Math.round(room));
    }
  }
  return out;
})()`

type webAxeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

func (v webAxeViolation) String() string {
	var nodes []string
	for i, n := range v.Nodes {
		if i == 3 {
			nodes = append(nodes, fmt.Sprintf("and %d more", len(v.Nodes)-3))
			break
		}
		b, _ := json.Marshal(n.Target)
		nodes = append(nodes, string(b)+" "+n.HTML)
	}
	return fmt.Sprintf("%s (%s): %s: %s", v.ID, v.Impact, v.Help, strings.Join(nodes, " | "))
}

// webRunAxe injects axe-core through DevTools (Runtime.evaluate, which the
// page's CSP does not govern; no script tag is added) and returns the
// serious and critical violations. label-content-name-mismatch, which axe
// marks experimental, is turned on.
func webRunAxe(t *testing.T, ctx context.Context, axe, at string) []webAxeViolation {
	t.Helper()
	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, err := chromedp.Run(runCtx, chromedp.Evaluate[bool](`(() => { if (!window.axe) { `+axe+"\n"+` } return !!window.axe; })()`)); err != nil {
		t.Fatalf("%s: inject axe-core: %v", at, err)
	}
	raw, err := chromedp.Run(runCtx, chromedp.Evaluate[[]byte](`axe.run(document, {
	  resultTypes: ['violations'],
	  rules: { 'label-content-name-mismatch': { enabled: true } }
	}).then(r => r.violations)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: run axe-core: %v", at, err)
	}
	var all []webAxeViolation
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatalf("%s: axe results: %v", at, err)
	}
	var bad []webAxeViolation
	for _, v := range all {
		if v.Impact == "serious" || v.Impact == "critical" {
			bad = append(bad, v)
		} else if v.Impact != "" {
			t.Logf("%s: axe (%s, not failing): %s", at, v.Impact, v)
		}
	}
	return bad
}
