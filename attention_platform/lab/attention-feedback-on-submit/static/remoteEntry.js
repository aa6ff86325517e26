/*
 * attention-feedback-on-submit: feedback on submit in the student's Assignments tab.
 *
 * Written by hand as a JupyterLab 4 federated extension (a module-federation container:
 * `init(shareScope)` then `get('./extension')`), so the course needs no Node build step; the
 * JupyterLab packages it uses come from the share scope JupyterLab fills. Its server side is
 * attention_platform/lab/feedback_on_submit.py, which reads what the course's grader wrote
 * into the student's own feedback folder.
 *
 * It adds a "Feedback on submit" panel at the top of nbgrader's Assignments tab: per assignment
 * the instructor's policy, when the next graded attempt is possible, and each attempt (newest
 * first, the one that counts unfolded) with its state — waiting (and how many are ahead), being
 * graded, graded (points, each hidden check's title passed or not in the notebook's order, "not
 * started" for a notebook left as released, the feedback pages part 1 first if the policy shows
 * them, whether it counts for the grade), not graded and why. While the policy refuses a submit,
 * that assignment's Submit button is disabled and says until when. Times are in the student's
 * own time zone. It asks every 3 s while the tab is open, every 0.5 s for a minute after a
 * submit. All text is set with textContent: nothing from the server is parsed as HTML.
 *
 * Under each assignment of nbgrader's lists it shows the deadline the grader wrote for the student
 * (attention_platform/lab/feedback_on_submit.py): the due date and the time left, their extension if they have
 * one, the late policy, and once the deadline has passed what a submission now would be (late by how
 * much and with what penalty or how many late days, or that it would not count: then Submit is off, as
 * the student's server refuses it). The time left is counted on the server's clock, which the grader
 * enforces, not the student's.
 */
(function () {
  'use strict';
  var NAME = 'attention-feedback-on-submit';
  var WAIT_SECONDS = 25;  // how long this server holds a status request that has nothing new to tell
  var shareScope = null;

  function versionKey(v) {
    return String(v).split(/[.-]/).map(function (p) { var n = parseInt(p, 10); return isNaN(n) ? 0 : n; });
  }
  function newest(a, b) {
    var x = versionKey(a), y = versionKey(b);
    for (var i = 0; i < Math.max(x.length, y.length); i++) {
      if ((x[i] || 0) !== (y[i] || 0)) { return (y[i] || 0) - (x[i] || 0); }
    }
    return 0;
  }
  function shared(name) {
    var versions = shareScope && shareScope[name];
    if (!versions) { return Promise.reject(new Error(NAME + ': JupyterLab shares no ' + name)); }
    var keys = Object.keys(versions).sort(newest);
    var loaded = keys.filter(function (k) { return versions[k].loaded; });
    return Promise.resolve(versions[(loaded[0] || keys[0])].get()).then(function (factory) { return factory(); });
  }

  var CSS = [
    '#feedback_on_submit_panel .fos-assignment { margin: .2rem 0 .8rem 0; }',
    '#feedback_on_submit_panel p { margin: .25rem 0; white-space: normal; overflow-wrap: anywhere; line-height: 1.4; }',
    '#feedback_on_submit_panel .fos-policy { color: var(--jp-ui-font-color2); }',
    '#feedback_on_submit_panel .fos-next { font-weight: 600; }',
    '#feedback_on_submit_panel ol.fos-attempts { list-style: none; padding-left: 0; margin: .3rem 0; }',
    '#feedback_on_submit_panel li.fos-attempt { margin-bottom: .5rem; }',
    '#feedback_on_submit_panel li.fos-attempt > details > summary { cursor: pointer; white-space: normal; line-height: 1.4; }',
    '#feedback_on_submit_panel .fos-not-started { color: var(--jp-ui-font-color2); font-style: italic; }',
    '#feedback_on_submit_panel .fos-state { font-weight: 600; }',
    '#feedback_on_submit_panel ul.fos-checks { list-style: none; padding-left: .4rem; margin: .2rem 0; }',
    '#feedback_on_submit_panel ul.fos-checks li[data-passed="false"] { color: var(--jp-error-color1); }',
    '#feedback_on_submit_panel .fos-mark { display: inline-block; width: 1.2em; font-weight: 700; }',
    '#feedback_on_submit_panel .fos-notebook { font-weight: 600; margin-top: .3rem; }',
    '#feedback_on_submit_panel .fos-pages a { margin-right: .6rem; }',
    '#nbgrader-assignment-list .attention-deadline { clear: both; padding: .1rem 15px .3rem 15px; margin: 0; ' +
      'white-space: normal; line-height: 1.4; }',
    '#nbgrader-assignment-list .attention-deadline[data-state="late"] { font-weight: 600; }',
    '#nbgrader-assignment-list .attention-deadline[data-state="closed"] { color: var(--jp-error-color1); font-weight: 600; }'
  ].join('\n');

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (key === 'text') { node.textContent = attrs[key]; } else { node.setAttribute(key, attrs[key]); }
    });
    (children || []).forEach(function (child) { if (child) { node.appendChild(child); } });
    return node;
  }
  // One format for every time the student reads, in their own time zone (the browser's).
  var CLOCK = new Intl.DateTimeFormat(undefined, { day: 'numeric', month: 'short',
    hour: '2-digit', minute: '2-digit', timeZoneName: 'short' });
  function when(iso) {
    if (!iso) { return ''; }
    var d = new Date(iso);
    return isNaN(d.getTime()) ? String(iso) : CLOCK.format(d);
  }
  function until(iso) { return duration(new Date(iso).getTime() - Date.now()); }
  function duration(ms) {
    var minutes = Math.max(1, Math.ceil(ms / 60000));
    if (minutes < 60) { return minutes + (minutes === 1 ? ' minute' : ' minutes'); }
    if (minutes < 48 * 60) { return Math.floor(minutes / 60) + ' h ' + ('0' + (minutes % 60)).slice(-2) + ' min'; }
    var hours = Math.floor(minutes / 60);
    return Math.floor(hours / 24) + ' days ' + (hours % 24) + ' h';
  }
  function plural(n, one, many) { return n + ' ' + (n === 1 ? one : many); }

  var HOUR = 3600000, UNIT = { hour: HOUR, day: 24 * HOUR };
  /* What the deadline means at the time ``at`` (ms): ``{state, text}``, state as the grader's (open,
     late, closed; '' without a deadline), by the grader's rule (attention_platform/deadlines/standing.py):
     nothing after ``cutoff`` counts; a penalty and a late day are taken for each hour or day begun. */
  function deadlineAt(d, at) {
    var due = d.effective_due ? new Date(d.effective_due).getTime() : NaN;
    if (isNaN(due)) { return { state: '', text: '' }; }
    var p = d.policy || {}, kind = p.kind || '', ext = !!(d.extension && d.extension.due);
    var cutoff = d.cutoff ? new Date(d.cutoff).getTime() : NaN;
    var lateDays = Number(d.late_days_before || 0);
    if (at <= due) {
      // the policy in the grader's own words (late_policy.describe), then what is the student's alone
      var after = (kind ? p.text || '' : 'After it, a submission is marked late.') +
                  (kind === 'penalty' && !isNaN(cutoff) ? ' For you that is until ' + when(d.cutoff) + '.' : '') +
                  (kind === 'late_days' ? ' You have ' + plural(lateDays, 'late day', 'late days') + ' left.' : '');
      return { state: 'open', text: 'Due ' + when(d.effective_due) + (ext ? ' with your extension (the deadline ' +
               'for the class: ' + when(d.due) + ')' : '') + ': ' + duration(due - at) + ' left. ' + after };
    }
    var late = at - due, passed = 'The deadline passed ' + duration(late) + ' ago (' + when(d.effective_due) +
                                  (ext ? ', with your extension' : '') + '). ';
    if (!isNaN(cutoff) && at > cutoff) {
      return { state: 'closed', text: passed + {
        closed: 'This assignment is closed to you: a submission now would not count, so Submit is off.',
        penalty: 'Late submissions counted until ' + when(d.cutoff) + ': a submission now would not count, so ' +
                 'Submit is off.',
        late_days: d.late_days_text ? d.late_days_text + ' Submit is off.' : ''  // the grader's words
      }[kind] || 'A submission now would not count, so Submit is off.' };
    }
    if (kind === 'penalty') {
      var percent = Math.min(Number(p.max_penalty_percent), Number(p.penalty_percent) * Math.ceil(late / (UNIT[p.per] || HOUR)));
      return { state: 'late', text: passed + 'A submission now is late: ' + percent + '% of its score is taken (' +
               p.penalty_percent + '% for each ' + p.per + ' begun, at most ' + p.max_penalty_percent + '%).' +
               (isNaN(cutoff) ? '' : ' Late submissions count until ' + when(d.cutoff) + ' (' + duration(cutoff - at) +
               ' left).') };
    }
    if (kind === 'late_days') {
      var days = Math.ceil(late / UNIT.day);
      return { state: 'late', text: passed + 'A submission now uses ' + plural(days, 'late day', 'late days') +
               ', without penalty: you would have ' + plural(lateDays - days, 'late day', 'late days') + ' left.' };
    }
    return { state: 'late', text: passed + 'A submission now is marked late.' };
  }
  /* What became of the submission that counts (its standing at the exchange's time of receipt). */
  function submissionLine(s) {
    if (!s || !s.at || s.state === 'no deadline') { return ''; }
    var p = s.policy || {}, late = duration(Number(s.late_by_seconds || 0) * 1000);
    var received = 'Your submission, received ' + when(s.at) + ', ';
    if (s.state === 'open') { return received + 'was on time.'; }
    if (s.state === 'closed') { return received + 'came after the assignment closed for you: it does not count.'; }
    if (p.kind === 'penalty') { return received + 'was ' + late + ' late: ' + s.penalty_percent + '% of its score is taken.'; }
    if (p.kind === 'late_days') {
      var days = Math.ceil(Number(s.late_by_seconds || 0) / 86400);
      return received + 'was ' + late + ' late: it uses ' + plural(days, 'late day', 'late days') + ', without penalty.';
    }
    return received + 'was ' + late + ' late.';
  }
  /* The time until which a submit is refused (ISO), or '' if a submit is graded now. */
  function refusedUntil(s) {
    var counts = s.policy && s.policy.counts;
    var next = s.next_graded_attempt;
    return next && (counts === 'last' || counts === 'best') && new Date(next).getTime() > Date.now() ? next : '';
  }
  function points(n) { return (Math.round(Number(n || 0) * 100) / 100) + (Number(n) === 1 ? ' point' : ' points'); }

  function makePlugin(mods) {
    var services = mods['@jupyterlab/services'], coreutils = mods['@jupyterlab/coreutils'];
    var state = { version: null, data: null, last: null, timer: null, unfolded: {}, assignments: {}, deadlines: {}, skew: 0 };
    function serverNow() { return Date.now() + state.skew; }

    function settings() { return services.ServerConnection.makeSettings(); }
    function url(path) { return coreutils.URLExt.join(settings().baseUrl, path); }
    function api(path) {
      var s = settings();
      return services.ServerConnection.makeRequest(coreutils.URLExt.join(s.baseUrl, path), {}, s);
    }

    function panelBody() {
      var root = document.getElementById('nbgrader-assignment-list');
      var group = root && root.querySelector('.panel-group');
      if (!group) { return null; }
      var mine = document.getElementById('feedback_on_submit_panel');
      if (!mine) {
        mine = el('div', { 'class': 'panel panel-default', id: 'feedback_on_submit_panel' }, [
          el('div', { 'class': 'panel-heading', text: 'Feedback on submit' }),
          el('div', { 'class': 'panel-body', id: 'feedback_on_submit_body' })
        ]);
        group.insertBefore(mine, group.firstChild);
        state.last = null;
      }
      return document.getElementById('feedback_on_submit_body');
    }

    function stateLine(a) {
      if (a.state === 'graded' && a.score !== undefined) {
        return points(a.score).replace(/ points?$/, '') + ' of ' + points(a.max_score) + ' from the hidden checks';
      }
      return {
        queued: 'waiting to be graded' + (a.ahead ? ' (' + a.ahead + ' ahead of you)' : ''),
        grading: 'being graded…',
        graded: 'graded',
        refused: 'not graded',
        'not graded': 'not graded',
        error: 'not graded (an error in the grader)'
      }[a.state] || a.state;
    }

    function attemptItem(assignment, a, number, notebooks, unfolded) {
      var line = el('summary', { 'class': 'fos-line' }, [
        el('span', { 'class': 'fos-when', text: 'Attempt ' + number + ', received ' + when(a.received) + ': ' }),
        el('span', { 'class': 'fos-state', text: stateLine(a) }),
        a.counted ? el('span', { 'class': 'fos-counted', text: ' — this attempt counts for your grade' }) : null
      ]);
      var key = assignment + '/' + (a.submission || number);
      var details = el('details', {}, [line]);
      if (state.unfolded[key] !== undefined ? state.unfolded[key] : unfolded) { details.setAttribute('open', ''); }
      details.addEventListener('toggle', function () { state.unfolded[key] = details.open; });
      if (a.checks && a.checks.length) {
        var passed = a.checks.filter(function (c) { return c.passed; }).length;
        details.appendChild(el('p', { 'class': 'fos-summary', text: passed + ' of ' + a.checks.length + ' hidden checks passed.' }));
        var list = el('ul', { 'class': 'fos-checks' }), notebook = null;
        a.checks.forEach(function (c) {
          if (c.notebook !== notebook) {
            notebook = c.notebook;
            list.appendChild(el('li', { 'class': 'fos-notebook', 'data-notebook': notebook, text: notebook + '.ipynb' }));
            if (c.started === false) {
              list.appendChild(el('li', { 'class': 'fos-not-started', text: 'Not started: its answers are as you fetched ' +
                'them, so its hidden checks score 0 for now.' }));
            }
          }
          if (c.started === false) { return; }
          list.appendChild(el('li', { 'data-passed': c.passed ? 'true' : 'false' }, [
            el('span', { 'class': 'fos-mark', text: c.passed ? '✓' : '✗' }),
            el('span', { text: c.title + ' (' + points(c.points) + ')' })
          ]));
        });
        details.appendChild(list);
      }
      var pages = a.pages ? Object.keys(a.pages).sort(function (x, y) {  // part 1 first
        var i = notebooks.indexOf(x), j = notebooks.indexOf(y);
        i = i < 0 ? notebooks.length : i; j = j < 0 ? notebooks.length : j;
        return i !== j ? i - j : (x < y ? -1 : x > y ? 1 : 0);
      }) : [];
      if (pages.length) {
        details.appendChild(el('p', { 'class': 'fos-pages' }, [el('span', { text: 'Feedback pages: ' })].concat(
          pages.map(function (nb) {
            // by attempt and notebook: the page's relative links to the other notebooks then
            // lead to the same attempt's pages (lab/feedback_on_submit.py serves them)
            return el('a', { href: url('attention/feedback-on-submit/page/' + encodeURIComponent(assignment) + '/' +
                                        number + '/' + encodeURIComponent(nb) + '.html'),
                             target: '_blank', rel: 'noopener noreferrer', text: nb });
          }))));
      }
      if (a.message) { details.appendChild(el('p', { 'class': 'fos-message', text: a.message })); }
      return el('li', { 'class': 'fos-attempt', 'data-state': a.state, 'data-counted': a.counted ? 'true' : 'false',
                        'data-number': String(number), 'data-submission': a.submission || '' }, [details]);
    }

    function render(body, data) {
      body.textContent = '';
      var names = Object.keys(data.assignments || {}).sort();
      if (!names.length) {
        body.appendChild(el('p', { 'class': 'fos-none', text: 'None of your assignments gives feedback on submit.' }));
        return;
      }
      names.forEach(function (name) {
        var s = data.assignments[name] || {};
        var box = el('div', { 'class': 'fos-assignment', 'data-assignment': name }, [el('div', { text: name })]);
        if (s.error) {
          box.appendChild(el('p', { 'class': 'fos-error', text: 'Your feedback cannot be shown: ' + s.error }));
          body.appendChild(box);
          return;
        }
        box.appendChild(el('p', { 'class': 'fos-policy', text: (s.policy && s.policy.text) || '' }));
        if (s.next_graded_attempt && new Date(s.next_graded_attempt).getTime() > Date.now()) {
          box.appendChild(el('p', { 'class': 'fos-next', id: 'fos-next-' + name.replace(/[^A-Za-z0-9_-]/g, '_'),
            text: 'Your next graded attempt is possible at ' + when(s.next_graded_attempt) +
                  ' (in ' + until(s.next_graded_attempt) + ').' }));
        }
        if (s.notice) { box.appendChild(el('p', { 'class': 'fos-notice', text: s.notice })); }
        var attempts = s.attempts || [];
        if (!attempts.length) {
          box.appendChild(el('p', { text: 'No attempt yet: submit to have it graded.' }));
        } else {
          var list = el('ol', { 'class': 'fos-attempts' });
          // the attempt that counts is unfolded; before one counts, the newest
          var counting = attempts.filter(function (a) { return a.counted; }).length ? null : attempts[attempts.length - 1];
          for (var i = attempts.length - 1; i >= 0; i--) {
            var a = attempts[i];
            list.appendChild(attemptItem(name, a, i + 1, s.notebooks || [], a.counted || a === counting));
          }
          box.appendChild(list);
        }
        body.appendChild(box);
      });
    }

    /* The last answer, drawn again when the minute changes too ("in N minutes" follows the clock). */
    function show() {
      var body = panelBody();
      if (!body || !state.data) { return; }
      var key = JSON.stringify(state.data.assignments) + Math.floor(Date.now() / 60000);
      if (key !== state.last || !body.firstChild) { state.last = key; render(body, state.data); }
    }

    /* Asks this server for the statuses; with ``wait``, the server holds the request until they differ
       from the version last shown (or ``wait`` seconds have passed). Resolves to whether it asked. */
    function refresh(wait) {
      if (!document.getElementById('nbgrader-assignment-list')) { return Promise.resolve(false); }
      var path = 'attention/feedback-on-submit';
      if (wait && state.version) { path += '?since=' + encodeURIComponent(state.version) + '&wait=' + wait; }
      return api(path).then(function (response) {
        return response.json().then(function (data) {
          if (!response.ok) { throw new Error(data.message || String(response.status)); }
          // the panel appears only once this server answers: a server without the course's
          // feedback-on-submit side (a Lab without it) shows nbgrader's tab unchanged
          if (!panelBody()) { return false; }
          state.data = data;
          show();
          state.assignments = data.assignments || {};
          state.deadlines = data.deadlines || {};
          state.version = data.version || null;
          var clock = new Date(data.now).getTime();
          state.skew = isNaN(clock) ? 0 : clock - Date.now();
          lockSubmits();
          return true;
        });
      });
    }

    /* nbgrader's Submit of each assignment the policy refuses now is disabled, and says until when;
       re-enabled once that time has come. nbgrader draws its list again at will: applied on each round
       and whenever the list changes. The student's server refuses such a submit anyway. */
    function lockSubmits() {
      showDeadlines();
      var rows = document.querySelectorAll('#fetched_assignments_list .list_item');
      Array.prototype.forEach.call(rows, function (row) {
        var name = row.querySelector('.item_name'), button = row.querySelector('.item_status button');
        if (!name || !button) { return; }
        var s = state.assignments[name.textContent.trim()];
        var until_ = s ? refusedUntil(s) : '';
        // closed to this student: their server refuses the submit (attempts/refusal.py), the button says so first
        var d = state.deadlines[name.textContent.trim()];
        var closed = d && d.now && !d.error && deadlineAt(d.now, serverNow()).state === 'closed';
        if (closed && button.textContent.trim() === 'Submit') {
          if (button.getAttribute('data-attention-locked') !== 'closed') {
            button.disabled = true;
            button.title = 'Submit is off: this assignment has closed to you.';
            button.setAttribute('data-attention-locked', 'closed');
          }
        } else if (until_ && button.textContent.trim() === 'Submit') {
          var why = 'Submit is off until ' + when(until_) + ': your next graded attempt is possible then.';
          if (!button.disabled || button.title !== why) {
            button.disabled = true;
            button.title = why;
            button.setAttribute('data-attention-locked', 'true');
            var next = document.getElementById('fos-next-' + name.textContent.trim().replace(/[^A-Za-z0-9_-]/g, '_'));
            if (next) { button.setAttribute('aria-describedby', next.id); }
          }
        } else if (!until_ && button.getAttribute('data-attention-locked')) {
          button.disabled = false;
          button.removeAttribute('title');
          button.removeAttribute('aria-describedby');
          button.removeAttribute('data-attention-locked');
        }
      });
    }

    /* Under each assignment of nbgrader's lists (released, fetched, submitted), the student's deadline.
       Written only when its text changes: the list's observer calls this again after every change. */
    function showDeadlines() {
      var rows = document.querySelectorAll('#nbgrader-assignment-list .list_item:not(.nested_list_item)');
      Array.prototype.forEach.call(rows, function (row) {
        var name = row.querySelector('.item_name'), line = row.querySelector('.attention-deadline');
        var d = name && state.deadlines[name.textContent.trim()];
        var shown = !d ? { state: '', text: '' } : d.error ? { state: 'error', text: 'Your deadline cannot be shown: ' +
                    d.error + '.' } : deadlineAt(d.now || {}, serverNow());
        var received = shown.text && d.submission ? submissionLine(d.submission) : '';
        if (received) { shown.text += ' ' + received; }
        if (!shown.text) {
          if (line) { line.parentNode.removeChild(line); }
          return;
        }
        if (!line) {
          line = el('p', { 'class': 'attention-deadline' });
          (row.firstElementChild || row).appendChild(line);
        }
        if (line.textContent !== shown.text) { line.textContent = shown.text; }
        if (line.getAttribute('data-state') !== shown.state) { line.setAttribute('data-state', shown.state); }
      });
    }

    function watchList() {
      var list = document.getElementById('nbgrader-assignment-list');
      if (!list || list.__attentionLockWatched) { return; }
      list.__attentionLockWatched = true;
      new MutationObserver(lockSubmits).observe(list, { childList: true, subtree: true });
    }

    /* One held request after another while the Assignments tab is open: a result shows the moment the
       grader writes it. Without the tab, or after a failed request, it looks again a little later. */
    function loop() {
      refresh(WAIT_SECONDS).then(function (asked) { return asked; }, function () { return false; }).then(function (asked) {
        watchList();
        state.timer = setTimeout(loop, asked ? 250 : 3000);
      });
    }

    function watchSubmits() {
      var connection = services.ServerConnection;
      if (connection.__attentionFeedbackWatched) { return; }
      var original = connection.makeRequest;
      connection.makeRequest = function (u, init) {
        var request = original.apply(this, arguments);
        if (init && String(init.method).toUpperCase() === 'POST' && /\/assignments\/submit(\?|$)/.test(String(u))) {
          request.then(function () { refresh(0).catch(function () {}); }, function () {});
        }
        return request;
      };
      connection.__attentionFeedbackWatched = true;
    }

    return {
      id: NAME + ':plugin',
      autoStart: true,
      activate: function () {
        document.head.appendChild(el('style', { text: CSS }));
        watchSubmits();
        loop();
        // between two answers, which may be a held request apart: the clock's part, with no request
        setInterval(function () { if (state.data) { show(); lockSubmits(); } }, 1000);
      }
    };
  }

  var MODULES = ['@jupyterlab/services', '@jupyterlab/coreutils'];
  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB[NAME] = {
    init: function (scope) { shareScope = scope; },
    get: function (module) {
      if (module !== './extension') { return Promise.reject(new Error(NAME + ' has no module ' + module)); }
      return Promise.all(MODULES.map(shared)).then(function (loaded) {
        var mods = {};
        MODULES.forEach(function (name, i) { mods[name] = loaded[i]; });
        var plugin = makePlugin(mods);
        return function () { return { __esModule: true, 'default': [plugin] }; };
      });
    }
  };
})();
