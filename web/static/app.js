// mcpgate dashboard: the only script. Pages render on the server; this file
// sends forms to the JSON API (with the CSRF header), shows errors inline,
// asks for confirmation in a <dialog>, copies text and switches tabs.
// No inline script anywhere: the content security policy forbids it.
(function () {
  'use strict';

  // The session's CSRF token; on https its cookie has the __Host- prefix
  // (which wins over a cookie without it that an older gateway left).
  function csrfToken() {
    var m = document.cookie.match(/(?:^|;\s*)__Host-mcpgate_csrf=([^;]*)/) ||
      document.cookie.match(/(?:^|;\s*)mcpgate_csrf=([^;]*)/);
    return m ? decodeURIComponent(m[1]) : '';
  }

  function setPath(obj, path, value) {
    var parts = path.split('.');
    var o = obj;
    for (var i = 0; i < parts.length - 1; i++) {
      if (typeof o[parts[i]] !== 'object' || o[parts[i]] === null) o[parts[i]] = {};
      o = o[parts[i]];
    }
    o[parts[parts.length - 1]] = value;
  }

  // serialize turns a form into the JSON body. data-type on a field:
  // number, bool, list (comma-separated), days (N days from now as RFC
  // 3339); empty values of typed
  // fields are left out.
  function serialize(form) {
    var body = {};
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!el.name || el.disabled || el.type === 'submit' || el.type === 'button') return;
      var type = el.dataset.type || '';
      var v;
      if (el.type === 'checkbox') v = el.checked;
      else if (el.type === 'radio') { if (!el.checked) return; v = el.value; }
      else v = el.value;
      if (type === 'number') { if (v === '') return; v = Number(v); }
      else if (type === 'bool') v = v === true || v === 'true';
      else if (type === 'list') v = String(v).split(/[\s,]+/).filter(Boolean);
      else if (type === 'days') { if (v === '') return; v = new Date(Date.now() + Number(v) * 86400000).toISOString(); }
      setPath(body, el.name, v);
    });
    // data-pairs="<name>": rows whose fields have no name of their own, a
    // key ([data-pair-key]) and a value ([data-pair-value]) each, become one
    // object (credential headers, tool aliases); a row without a key is
    // left out.
    form.querySelectorAll('[data-pairs]').forEach(function (box) {
      var o = {};
      box.querySelectorAll('[data-pair]').forEach(function (row) {
        var k = row.querySelector('[data-pair-key]'), v = row.querySelector('[data-pair-value]');
        var key = k ? k.value.trim() : '';
        if (key) o[key] = v ? v.value : '';
      });
      setPath(body, box.dataset.pairs, o);
    });
    return body;
  }

  function showError(form, msg) {
    var el = form.querySelector('[data-form-error]');
    if (!el) { window.alert(msg); return; }
    el.textContent = msg;
    el.hidden = false;
  }

  function clearError(form) {
    var el = form.querySelector('[data-form-error]');
    if (el) { el.hidden = true; el.textContent = ''; }
  }

  function fill(template, data) {
    return template.replace(/\{([a-z_]+)\}/g, function (_, k) {
      return data && data[k] != null ? encodeURIComponent(String(data[k])) : '';
    });
  }

  // ---- confirmation dialog ----
  var dialog, dlgTitle, dlgMsg, dlgOK, dlgTypeWrap, dlgType, dlgExpected;

  function askConfirm(spec) {
    dialog = dialog || document.getElementById('confirm-dialog');
    if (!dialog || typeof dialog.showModal !== 'function') {
      return Promise.resolve(window.confirm((spec.title || 'Are you sure?') + '\n\n' + (spec.message || '')));
    }
    dlgTitle = document.getElementById('confirm-title');
    dlgMsg = document.getElementById('confirm-message');
    dlgOK = document.getElementById('confirm-ok');
    dlgTypeWrap = document.getElementById('confirm-type-wrap');
    dlgType = document.getElementById('confirm-type');
    dlgExpected = document.getElementById('confirm-type-expected');
    dlgTitle.textContent = spec.title || 'Are you sure?';
    dlgMsg.textContent = spec.message || '';
    dlgOK.textContent = spec.action || 'Confirm';
    dlgOK.className = 'btn ' + (spec.danger === false ? 'btn-primary' : 'btn-danger');
    dlgType.value = '';
    if (spec.typeText) {
      dlgTypeWrap.hidden = false;
      dlgExpected.textContent = spec.typeText;
      dlgOK.disabled = true;
      dlgType.oninput = function () { dlgOK.disabled = dlgType.value.trim() !== spec.typeText; };
      // Enter in the field would submit with the first button (Cancel).
      dlgType.onkeydown = function (e) {
        if (e.key !== 'Enter') return;
        e.preventDefault();
        if (!dlgOK.disabled) dialog.close('ok');
      };
    } else {
      dlgTypeWrap.hidden = true;
      dlgOK.disabled = false;
      dlgType.oninput = null;
    }
    dialog.returnValue = '';
    return new Promise(function (resolve) {
      dialog.addEventListener('close', function onClose() {
        dialog.removeEventListener('close', onClose);
        resolve(dialog.returnValue === 'ok' && (!spec.typeText || dlgType.value.trim() === spec.typeText));
      });
      dialog.showModal();
      (spec.typeText ? dlgType : document.getElementById('confirm-cancel')).focus();
    });
  }

  // confirmSpec returns what to ask before submitting, or null. A form asks
  // with data-confirm; a switch asks with data-confirm-on / data-confirm-off
  // depending on the direction it was flipped.
  function confirmSpec(form, changed) {
    if (changed && changed.type === 'checkbox') {
      var dir = changed.checked ? 'On' : 'Off';
      var msg = changed.dataset['confirm' + dir];
      if (msg) {
        return { title: changed.dataset['confirm' + dir + 'Title'], message: msg,
          action: changed.dataset['confirm' + dir + 'Action'], danger: true };
      }
      return null;
    }
    if (form.dataset.confirm) {
      return { title: form.dataset.confirmTitle, message: form.dataset.confirm,
        action: form.dataset.confirmAction, typeText: form.dataset.confirmType };
    }
    return null;
  }

  // ---- API forms ----
  function request(form, body) {
    var method = (form.dataset.apiMethod || 'POST').toUpperCase();
    var opts = { method: method, credentials: 'same-origin',
      headers: { 'Accept': 'application/json', 'X-CSRF-Token': csrfToken() } };
    // A DELETE carries a body only when its form has fields (deleting the
    // account needs the password).
    if (method !== 'GET' && (method !== 'DELETE' || Object.keys(body || {}).length > 0)) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    return fetch(form.dataset.apiPath, opts).then(function (res) {
      if (res.status === 204) return { res: res, data: null };
      return res.json().then(function (data) { return { res: res, data: data }; }, function () { return { res: res, data: null }; });
    });
  }

  function errorMessage(res, data) {
    if (res.status === 429) {
      var wait = parseInt(res.headers.get('Retry-After') || '', 10);
      return 'Too many attempts, wait ' + (wait > 0 ? wait : 60) + ' s and try again.';
    }
    if (data && data.error && data.error.message) return data.error.message;
    if (res.status === 401) return 'Your session has ended. Log in again.';
    return 'Something went wrong (' + res.status + '). Try again.';
  }

  function setBusy(form, busy) {
    form.classList.toggle('busy', busy);
    if (busy) form.setAttribute('aria-busy', 'true'); else form.removeAttribute('aria-busy');
    Array.prototype.forEach.call(form.querySelectorAll('button[type=submit], button:not([type])'), function (b) { b.disabled = busy; });
  }

  function revertSwitch(changed) {
    if (changed && changed.type === 'checkbox') changed.checked = !changed.checked;
    if (changed && changed.tagName === 'SELECT' && changed.dataset.prev != null) changed.value = changed.dataset.prev;
  }

  function reveal(sel, data) {
    var panel = document.querySelector(sel);
    if (!panel) return;
    panel.querySelectorAll('[data-fill]').forEach(function (el) {
      var v = data ? data[el.dataset.fill] : '';
      // A list (recovery codes) is shown one item a line.
      el.textContent = v == null ? '' : Array.isArray(v) ? v.join('\n') : String(v);
    });
    // An image the API sent as a PNG data: URL (the two-factor QR code);
    // nothing else is ever put in a src.
    panel.querySelectorAll('img[data-fill-src]').forEach(function (el) {
      var v = data ? data[el.dataset.fillSrc] : '';
      if (typeof v === 'string' && v.indexOf('data:image/png;base64,') === 0) el.src = v;
    });
    if (data && data.key) {
      document.querySelectorAll('[data-snippet]').forEach(function (el) {
        el.textContent = el.textContent.split('<YOUR_MCP_KEY>').join(data.key);
      });
      document.querySelectorAll('[data-placeholder-hint]').forEach(function (el) {
        el.textContent = 'Every snippet below now contains your new key “' + (data.name || '') + '”. Copy the one for your client.';
      });
    }
    panel.hidden = false;
    panel.focus();
    panel.scrollIntoView({ block: 'nearest' });
  }

  // relTime says how far t is from now, rounded to the nearest unit as the
  // server's pages do (web/format.go timeAgo).
  function relTime(t) {
    var d = t.getTime() - Date.now();
    var future = d > 0;
    d = Math.abs(d);
    var min = Math.round(d / 60000), h = Math.round(d / 3600000), days = Math.round(d / 86400000);
    var s;
    if (d < 60000) { if (!future) return 'just now'; s = '<1 min'; }
    else if (min < 60) s = min + ' min';
    else if (h < 48) s = h + ' h';
    else s = days + ' days';
    return future ? 'in ' + s : s + ' ago';
  }

  // addKeyRow puts a key the API just created at the top of the keys list,
  // so that the list agrees with what already works.
  function addKeyRow(sel, data) {
    var tpl = document.querySelector(sel);
    var table = document.getElementById('keys-table');
    if (!tpl || !table || !data || !data.id) return;
    var row = tpl.content.firstElementChild.cloneNode(true);
    var cells = {
      name: data.name, id: data.id, owner_email: data.owner_email || '',
      access: data.scope === 'read_only' ? 'Read-only' : 'Full',
      expires: data.expires_at ? relTime(new Date(data.expires_at)) : 'never'
    };
    row.querySelectorAll('[data-cell]').forEach(function (el) { el.textContent = cells[el.dataset.cell] || ''; });
    var revoke = row.querySelector('[data-key-revoke]');
    if (revoke) {
      revoke.dataset.apiPath += encodeURIComponent(data.id);
      revoke.dataset.confirm = '“' + data.name + '” stops working at once, in every client that uses it. This cannot be undone.';
    }
    table.tBodies[0].insertBefore(row, table.tBodies[0].firstChild);
    document.querySelectorAll('[data-keys-table]').forEach(function (el) { el.hidden = false; });
    document.querySelectorAll('[data-keys-empty]').forEach(function (el) { el.hidden = true; });
    document.querySelectorAll('[data-active-count]').forEach(function (el) {
      el.textContent = String((parseInt(el.textContent, 10) || 0) + 1);
    });
    markScrollable();
  }

  // ---- flash: a message the next page shows, for actions that leave the page ----
  var flashKey = 'mcpgate.flash';
  function setFlash(msg) {
    try { window.sessionStorage.setItem(flashKey, msg); } catch (err) { /* storage off: no message */ }
  }
  function showFlash() {
    var msg = null;
    try { msg = window.sessionStorage.getItem(flashKey); window.sessionStorage.removeItem(flashKey); } catch (err) { return; }
    var el = document.getElementById('flash');
    if (!msg || !el) return;
    el.querySelector('[data-flash-text]').textContent = msg;
    el.hidden = false;
  }

  function onSuccess(form, data, changed, status) {
    var action = form.dataset.done || 'reload';
    if (form.dataset.flash && (action === 'reload' || action === 'next' || action.indexOf('redirect:') === 0)) setFlash(form.dataset.flash);
    // data-flash-accepted: a 202 answer's own words become the flash (a
    // sign-up that waits for its emailed link).
    if (form.dataset.flashAccepted != null && status === 202 && data && typeof data.status === 'string') setFlash(data.status);
    if (action === 'reload') { window.location.reload(); return; }
    if (action === 'next') { window.location.assign(form.dataset.next || '/app'); return; }
    if (action.indexOf('redirect:') === 0) { window.location.assign(fill(action.slice(9), data)); return; }
    // data-done="go:<member>": the answer names where the browser goes
    // (an upstream's authorization request, for Connect).
    if (action.indexOf('go:') === 0) {
      var to = data ? String(data[action.slice(3)] || '') : '';
      if (/^https?:\/\//i.test(to)) window.location.assign(to);
      return;
    }
    if (action.indexOf('reveal:') === 0) {
      form.reset();
      // data-done-hide: what the next step replaces (the two-factor
      // enrolment once its recovery codes are shown).
      if (form.dataset.doneHide) document.querySelectorAll(form.dataset.doneHide).forEach(function (el) { el.hidden = true; });
      if (form.dataset.addKeyRow) addKeyRow(form.dataset.addKeyRow, data);
      reveal(action.slice(7), data);
      return;
    }
    if (action === 'saved') {
      if (changed && changed.tagName === 'SELECT') changed.dataset.prev = changed.value;
      var s = form.querySelector('[data-saved]');
      if (s) { s.hidden = false; setTimeout(function () { s.hidden = true; }, 2000); }
      var row = form.closest('tr');
      if (row && changed && changed.name === 'enabled') row.classList.toggle('row-dim', !changed.checked);
    }
  }

  // sameAsError checks fields that must repeat another (a new password
  // typed twice); such fields have no name and are never sent.
  function sameAsError(form) {
    var bad = Array.prototype.filter.call(form.querySelectorAll('[data-same-as]'), function (el) {
      var other = document.querySelector(el.dataset.sameAs);
      return other && other.value !== el.value;
    })[0];
    return bad ? (bad.dataset.sameMessage || 'The two values differ.') : '';
  }

  function submit(form, changed) {
    if (form.dataset.busy) return;
    clearError(form);
    var mismatch = sameAsError(form);
    if (mismatch) { showError(form, mismatch); return; }
    var spec = confirmSpec(form, changed);
    var ready = spec ? askConfirm(spec) : Promise.resolve(true);
    ready.then(function (ok) {
      if (!ok) { revertSwitch(changed); return; }
      var body = serialize(form);
      form.dataset.busy = '1';
      setBusy(form, true);
      var send = function (b) {
        return request(form, b).then(function (r) {
          // A tool the workspace marks "ask first": confirm, then send again.
          if (r.res.status === 409 && /\/call$/.test(form.dataset.apiPath) && !b.confirmed &&
              r.data && r.data.error && /confirm/i.test(r.data.error.message)) {
            return askConfirm({ title: 'Confirm this action', message: 'This workspace asks for a human’s confirmation before this tool runs. Go ahead?',
              action: 'Go ahead', danger: false }).then(function (yes) {
              if (!yes) return { cancelled: true };
              b.confirmed = true;
              return send(b);
            });
          }
          return r;
        });
      };
      return send(body).then(function (r) {
        delete form.dataset.busy;
        setBusy(form, false);
        if (r.cancelled) return;
        if (!r.res.ok) {
          revertSwitch(changed);
          // The login's second step: the password was right and the account
          // signs in with two factors.
          if (form.dataset.secondFactor != null && r.data && r.data.error && r.data.error.code === 'totp_required') {
            showSecondFactor(form);
            return;
          }
          if (r.res.status === 401 && !/\/auth\//.test(form.dataset.apiPath)) {
            window.location.assign('/login?next=' + encodeURIComponent(window.location.pathname));
            return;
          }
          showError(form, errorMessage(r.res, r.data));
          return;
        }
        onSuccess(form, r.data, changed, r.res.status);
      }, function () {
        delete form.dataset.busy;
        setBusy(form, false);
        revertSwitch(changed);
        showError(form, 'Could not reach the server. Check your connection and try again.');
      });
    });
  }

  // ---- login's second step: a code from the app, or a recovery code ----
  function setFactor(form, which) {
    var input = null;
    form.querySelectorAll('[data-factor]').forEach(function (f) {
      var on = f.dataset.factor === which;
      f.hidden = !on;
      f.querySelectorAll('input').forEach(function (el) {
        el.disabled = !on;
        el.required = on;
        if (!on) el.value = '';
        else input = el;
      });
    });
    if (input) input.focus();
  }

  function showSecondFactor(form) {
    var first = form.querySelector('[data-first-step]');
    var second = form.querySelector('[data-second-step]');
    if (!second) return;
    // The email and password stay in the form (hidden, still sent): the
    // second request carries them with the code.
    if (first) first.hidden = true;
    second.hidden = false;
    setFactor(form, 'totp');
  }

  document.addEventListener('submit', function (e) {
    var form = e.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.apiPath) return;
    e.preventDefault();
    submit(form, null);
  });

  // Switches and selects in data-auto forms save as soon as they change.
  document.addEventListener('focusin', function (e) {
    if (e.target.tagName === 'SELECT' && e.target.dataset.prev == null) e.target.dataset.prev = e.target.value;
  });
  document.addEventListener('change', function (e) {
    var el = e.target;
    // data-enables: a checkbox that unlocks a button ("I saved them").
    if (el.dataset && el.dataset.enables) {
      document.querySelectorAll(el.dataset.enables).forEach(function (b) { b.disabled = !el.checked; });
    }
    var form = el.form;
    if (!form || form.dataset.auto == null || !form.dataset.apiPath) return;
    if (el.tagName === 'SELECT' && el.dataset.prev == null) el.dataset.prev = el.value;
    submit(form, el);
  });

  // ---- copy buttons ----
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    return new Promise(function (resolve, reject) {
      var ta = document.createElement('textarea');
      ta.value = text;
      ta.setAttribute('readonly', '');
      ta.className = 'offscreen';
      document.body.appendChild(ta);
      ta.select();
      var ok = false;
      try { ok = document.execCommand('copy'); } catch (err) { ok = false; }
      document.body.removeChild(ta);
      if (ok) resolve(); else reject(new Error('copy failed'));
    });
  }

  document.addEventListener('click', function (e) {
    var btn = e.target.closest('[data-copy-target]');
    if (btn) {
      var src = document.querySelector(btn.dataset.copyTarget);
      if (!src) return;
      var label = btn.textContent;
      copyText(src.value != null && src.tagName === 'INPUT' ? src.value : src.textContent).then(function () {
        btn.textContent = 'Copied';
        btn.classList.add('copied');
      }, function () {
        var range = document.createRange();
        range.selectNodeContents(src);
        var sel = window.getSelection();
        sel.removeAllRanges();
        sel.addRange(range);
        btn.textContent = 'Press Ctrl+C';
      });
      setTimeout(function () { btn.textContent = label; btn.classList.remove('copied'); }, 2000);
      return;
    }
    if (e.target.closest('[data-reload]')) { window.location.reload(); return; }
    var factor = e.target.closest('[data-factor-switch]');
    if (factor && factor.form) { clearError(factor.form); setFactor(factor.form, factor.dataset.factorSwitch); return; }
    var setter = e.target.closest('[data-set-value]');
    if (setter) {
      var input = document.querySelector(setter.dataset.setValue);
      if (input) { input.value = setter.dataset.value || ''; input.focus(); }
      return;
    }
    if (e.target.closest('[data-flash-close]')) { document.getElementById('flash').hidden = true; return; }
    // Close an open menu when clicking elsewhere.
    document.querySelectorAll('details.menu[open]').forEach(function (d) {
      if (!d.contains(e.target)) d.open = false;
    });
  });

  document.addEventListener('keydown', function (e) {
    if (e.key === 'Escape') {
      document.querySelectorAll('details.menu[open]').forEach(function (d) { d.open = false; d.querySelector('summary').focus(); });
      if (nav && nav.classList.contains('nav-open')) { setNavOpen(false); navToggle.focus(); }
    }
  });

  // ---- navigation on a phone ----
  // Under 760 px the workspace links fold behind the menu button (app.css);
  // this marks the navigation ready for that, so that without the script
  // the links stay in view, wrapped.
  var nav = document.querySelector('.sidenav');
  var navToggle = nav && nav.querySelector('.nav-toggle');
  function setNavOpen(open) {
    nav.classList.toggle('nav-open', open);
    navToggle.setAttribute('aria-expanded', open ? 'true' : 'false');
  }
  if (navToggle) {
    nav.classList.add('nav-ready');
    navToggle.addEventListener('click', function () { setNavOpen(!nav.classList.contains('nav-open')); });
    document.addEventListener('click', function (e) {
      if (nav.classList.contains('nav-open') && !nav.contains(e.target)) setNavOpen(false);
    });
  }

  // ---- tabs ----
  function initTabs(root) {
    var tabs = Array.prototype.slice.call(root.querySelectorAll('[role=tab]'));
    function select(tab, focus) {
      tabs.forEach(function (t) {
        var on = t === tab;
        t.setAttribute('aria-selected', on ? 'true' : 'false');
        t.tabIndex = on ? 0 : -1;
        var panel = document.getElementById(t.getAttribute('aria-controls'));
        if (panel) panel.hidden = !on;
      });
      if (focus) tab.focus();
    }
    tabs.forEach(function (t, i) {
      t.addEventListener('click', function () { select(t, false); });
      t.addEventListener('keydown', function (e) {
        var j = null;
        if (e.key === 'ArrowRight' || e.key === 'ArrowDown') j = (i + 1) % tabs.length;
        else if (e.key === 'ArrowLeft' || e.key === 'ArrowUp') j = (i - 1 + tabs.length) % tabs.length;
        else if (e.key === 'Home') j = 0;
        else if (e.key === 'End') j = tabs.length - 1;
        if (j !== null) { e.preventDefault(); select(tabs[j], true); }
      });
    });
    root.classList.add('tabs-ready');
    var initial = tabs.filter(function (t) { return t.getAttribute('aria-selected') === 'true'; })[0] || tabs[0];
    if (initial) select(initial, false);
  }

  document.querySelectorAll('[data-tabs]').forEach(initTabs);
  showFlash();

  // A region that scrolls sideways (a wide table on a phone) must be
  // reachable by keyboard: make it focusable while it scrolls.
  function markScrollable() {
    document.querySelectorAll('.table-wrap, .logs').forEach(function (el) {
      var scrolls = el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1;
      if (scrolls && !el.hasAttribute('tabindex')) { el.tabIndex = 0; el.dataset.madeFocusable = '1'; }
      else if (!scrolls && el.dataset.madeFocusable) { el.removeAttribute('tabindex'); delete el.dataset.madeFocusable; }
    });
  }
  markScrollable();
  window.addEventListener('resize', markScrollable);
})();
