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
// horizontal scrolling, no serious or critical axe-core violation, every
// select wide enough for each option's text, every table readable
// (webTablesJS) and every workspace destination reachable (webNavJS). It saves a screenshot per width
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
		tables, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf("(%s)(%t)", webTablesJS, vp.mob)))
		if err != nil {
			t.Fatalf("%s: measure tables: %v", at, err)
		}
		for _, p := range tables {
			t.Errorf("%s: table: %s", at, p)
		}
		nav, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf("(%s)(%t)", webNavJS, vp.mob)))
		if err != nil {
			t.Fatalf("%s: measure the navigation: %v", at, err)
		}
		for _, p := range nav {
			t.Errorf("%s: navigation: %s", at, p)
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
			webShotTables(t, ctx, shot)
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

// webShotTables saves, for a page with tables, what the screen shows with
// the first table scrolled to its top, as <shot>-table.png (the viewport
// screenshot of a phone shows only the top of the page).
func webShotTables(t *testing.T, ctx context.Context, shot string) {
	t.Helper()
	scrolled, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
	  const t = [...document.querySelectorAll('main table')].find(t => t.getClientRects().length);
	  if (!t) return false;
	  window.scrollTo(0, t.getBoundingClientRect().top + window.scrollY - 120);
	  return true;
	})()`))
	if err != nil || !scrolled {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Logf("screenshot %s-table: %v", shot, err)
		return
	}
	if err := os.WriteFile(filepath.Join(webScreenshotDir, shot+"-table.png"), png, 0o644); err != nil {
		t.Errorf("save screenshot: %v", err)
	}
	_, _ = chromedp.Run(ctx, chromedp.Evaluate[bool](`(window.scrollTo(0, 0), true)`))
}

// webTablesJS lists what makes a table hard to read. On a phone (true) a
// table must be a stack of cards: no cell, link, button or field may lie
// outside the viewport or its table's box (a table scrolled sideways inside
// its card hides them), and every cell but a row's actions carries the
// column's name (data-label) that the card shows beside the value. On a
// laptop (false) a table stays a table, with its header row in view.
const webTablesJS = `(mobile => {
  const out = [], W = window.innerWidth;
  const text = el => (el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 40);
  for (const t of document.querySelectorAll('main table')) {
    if (!t.getClientRects().length) continue;
    const id = 'table' + (t.id ? '#' + t.id : '.' + t.className.split(' ').join('.'));
    if (!mobile) {
      const head = t.tHead;
      if (getComputedStyle(t).display !== 'table') out.push(id + ' is display: ' + getComputedStyle(t).display + ', not a table');
      if (head && (getComputedStyle(head).display !== 'table-header-group' || head.getBoundingClientRect().height < 10)) out.push(id + ' hides its header row');
      continue;
    }
    const wrap = t.closest('.table-wrap') || t.parentElement;
    const right = Math.min(W, wrap.getBoundingClientRect().right), left = Math.max(0, wrap.getBoundingClientRect().left);
    for (const el of t.querySelectorAll('tbody td, tbody a, tbody button, tbody select, tbody input, tbody code, tbody strong, tbody .pill')) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      if (r.left < left - 1 || r.right > right + 1) {
        out.push(id + ': ' + el.tagName.toLowerCase() + ' "' + text(el) + '" spans ' + Math.round(r.left) + '..' + Math.round(r.right) + ', outside ' + Math.round(left) + '..' + Math.round(right));
        if (out.length > 8) return out;
      }
    }
    for (const td of t.querySelectorAll('tbody td')) {
      if (td.classList.contains('actions-cell')) continue;
      const label = (td.dataset.label || '').trim();
      const shown = getComputedStyle(td, '::before').content;
      if (!label) out.push(id + ': cell "' + text(td) + '" has no data-label');
      else if (!shown.includes(label)) out.push(id + ': cell "' + text(td) + '" does not show its label ' + label + ' (::before is ' + shown + ')');
      if (out.length > 8) return out;
    }
  }
  return out;
})`

// webNavDestinations are the workspace navigation's links, in order.
var webNavDestinations = []string{"Overview", "Sandboxes", "Keys", "E2B connection", "Servers", "Approvals", "Audit log", "Settings"}

// webNavJS checks the workspace navigation. On a phone (true) every
// destination is in view, or a menu button in view shows them all when
// pressed (it is pressed twice: open, measured, closed again), with the
// count of waiting approvals on the button and on the Approvals link. On a
// laptop (false) each destination has its own icon.
var webNavJS = `(mobile => {
  const nav = document.querySelector('nav.sidenav');
  if (!nav) return [];
  const want = ` + webJSON(webNavDestinations) + `;
  const links = [...nav.querySelectorAll('a')];
  const names = links.map(a => (a.textContent || '').trim().replace(/\s+/g, ' '));
  const out = [];
  want.forEach((w, i) => { if (!names[i] || !names[i].startsWith(w)) out.push('link ' + (i + 1) + ' is "' + (names[i] || '') + '", want ' + w); });
  if (!mobile) {
    const icons = links.map(a => { const s = a.querySelector('svg.ico'); return s ? s.innerHTML.trim() : ''; });
    icons.forEach((ic, i) => {
      if (!ic) out.push(names[i] + ' has no icon');
      else if (icons.indexOf(ic) !== i) out.push(names[i] + ' has the same icon as ' + names[icons.indexOf(ic)]);
    });
    return out;
  }
  const W = window.innerWidth, H = window.innerHeight;
  const inView = el => {
    if (!el) return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.left >= -1 && r.right <= W + 1 && r.top >= -1 && r.bottom <= H + 1 &&
      getComputedStyle(el).visibility !== 'hidden';
  };
  const hidden = () => links.filter(a => !inView(a)).map(a => (a.textContent || '').trim());
  const pending = document.getElementById('pending-count');
  if (hidden().length === 0) {
    if (pending && !inView(pending)) out.push('the pending count is not in view');
    return out;
  }
  const btn = nav.querySelector('button[aria-controls]');
  if (!inView(btn)) return out.concat(['out of view, with no menu button in view: ' + hidden().join(', ')]);
  if (btn.getAttribute('aria-expanded') !== 'false') out.push('menu button aria-expanded=' + btn.getAttribute('aria-expanded') + ' while closed');
  if (pending && !inView(document.getElementById('menu-pending-count'))) out.push('the menu button does not show the pending count');
  // A click closes the open menus (app.js); they are opened again after,
  // for the checks that follow.
  const opened = [...document.querySelectorAll('details[open]')];
  btn.click();
  const still = hidden();
  if (still.length) out.push('out of view with the menu open: ' + still.join(', '));
  if (btn.getAttribute('aria-expanded') !== 'true') out.push('menu button aria-expanded=' + btn.getAttribute('aria-expanded') + ' while open');
  if (pending && !inView(pending)) out.push('the pending count is not in view with the menu open');
  btn.click();
  if (links.some(inView)) out.push('the menu does not close again');
  opened.forEach(d => { d.open = true; });
  return out;
})`

// webJSON is v as a JavaScript literal.
func webJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// webCheckPhoneMenu opens the navigation's menu at 390 px and checks the
// open menu as webCheckPage checks a page (axe, a screenshot as
// <name>-390-menu.png), with pending the count it must show (0: none).
func webCheckPhoneMenu(t *testing.T, ctx context.Context, name string, pending int) {
	t.Helper()
	axe := webAxeSource(t)
	webRun(t, ctx, name+" menu at 390 px", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)),
		chromedp.Click(chromedp.CSS(".nav-toggle")), chromedp.WaitVisible(chromedp.CSS(`.sidenav a[href$="/settings"]`)))
	at := name + " with the menu open at 390 px"
	if pending > 0 {
		for _, sel := range []string{"#menu-pending-count", "#pending-count"} {
			if s := webText(t, ctx, sel); !strings.HasPrefix(s, fmt.Sprint(pending)) {
				t.Errorf("%s: %s = %q, want %d", at, sel, s, pending)
			}
		}
	} else if n := webCount(t, ctx, "#menu-pending-count, #pending-count"); n != 0 {
		t.Errorf("%s: a pending count with nothing pending", at)
	}
	for _, v := range webRunAxe(t, ctx, axe, at) {
		t.Errorf("%s: axe %s", at, v)
	}
	webShotViewport(t, ctx, name+"-390-menu")
	webRun(t, ctx, name+" menu closes on Escape", chromedp.KeyEvent("\x1b"),
		chromedp.WaitNotVisible(chromedp.CSS(`.sidenav a[href$="/settings"]`)), chromedp.EmulateViewport(1280, 900))
}

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
