/*
 * attention-course-lab: the course in a hub user's JupyterLab.
 *
 * Written by hand as a JupyterLab 4 federated extension (a module-federation container:
 * `init(shareScope)` then `get('./extension')`), so the course needs no Node build step:
 * the JupyterLab packages it uses are taken from the share scope JupyterLab itself fills.
 * Its server side, which also decides what each role sees, is attention_platform/lab/course_lab.py.
 *
 * What it adds:
 *   - a "Course" menu and launcher cards fitted to the role (page config `attentionCourse`):
 *     students: their assignments (opened on start) and Validate; TAs and instructors: the
 *     course's formgrader in a new tab; instructors: ~/course-source;
 *   - Validate on every notebook's toolbar and on every notebook of nbgrader's Assignments list
 *     (whose own Validate posts to a server extension the course does not load): saves the
 *     notebook if it is open, runs it on the server and shows what is still to do and the
 *     verdicts of its public checks, saying plainly that the hidden checks run only after submitting;
 *   - Submit in nbgrader's list saves the assignment's open notebooks first (or hands in nothing
 *     and says why), and says so when the exchange filed nothing new (files identical to the
 *     newest submission);
 *   - the times of the submissions in nbgrader's list in the student's zone (nbgrader shows UTC);
 *   - a refused submit (feedback on submit's policy, or a notebook that could not be saved) in a
 *     dialog of its own: the reason, and the next graded attempt's time in the student's zone;
 *   - a confirmation after fetching, submitting and fetching feedback in nbgrader's list (short
 *     enough for a toast, which JupyterLab cuts at 140 characters), and a way to open feedback as a
 *     page of its own (links work there without "Trust HTML"); fetching feedback with none to fetch
 *     says so.
 * All text is set with textContent: nothing from the server is parsed as HTML.
 */
(function () {
  'use strict';
  var NAME = 'attention-course-lab';
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
  /* The module JupyterLab shares under `name` (one version each in a JupyterLab build). */
  function shared(name) {
    var versions = shareScope && shareScope[name];
    if (!versions) { return Promise.reject(new Error(NAME + ': JupyterLab shares no ' + name)); }
    var keys = Object.keys(versions).sort(newest);
    var loaded = keys.filter(function (k) { return versions[k].loaded; });
    return Promise.resolve(versions[(loaded[0] || keys[0])].get()).then(function (factory) { return factory(); });
  }

  var CSS = [
    '.attention-validate { max-width: 40rem; }',
    '.attention-validate p, .attention-validate li { white-space: normal; overflow-wrap: anywhere; line-height: 1.45; }',
    '.attention-validate ul { padding-left: 1.2rem; margin: .4rem 0; }',
    '.attention-validate .attention-validate-headline { font-weight: 600; }',
    '.attention-validate .attention-validate-note { color: var(--jp-ui-font-color2); }',
    '.attention-validate .attention-validate-mark { font-weight: 700; margin-right: .3rem; }',
    '.attention-message { max-width: 36rem; }',
    '.attention-message p { white-space: pre-wrap; overflow-wrap: anywhere; line-height: 1.45; margin: .4rem 0; }',
    '.attention-refusal .attention-refusal-next { font-weight: 600; }'
  ].join('\n');

  // One format for every time the student reads, in their own time zone (the browser's); the same
  // as the feedback-on-submit panel's.
  var CLOCK = new Intl.DateTimeFormat(undefined, { day: 'numeric', month: 'short',
    hour: '2-digit', minute: '2-digit', timeZoneName: 'short' });
  /* An ISO time or nbgrader's "2026-01-31 10:32:11.123456 UTC" as a Date (invalid if neither). */
  function instant(stamp) {
    return new Date(String(stamp || '').trim().replace(/ UTC$/, 'Z').replace(' ', 'T'));
  }
  /* Such a time in the student's zone. */
  function when(stamp) {
    var d = instant(stamp);
    return isNaN(d.getTime()) ? String(stamp || '') : CLOCK.format(d);
  }
  function until(iso) {
    var minutes = Math.max(1, Math.ceil((new Date(iso).getTime() - Date.now()) / 60000));
    if (minutes < 60) { return minutes + (minutes === 1 ? ' minute' : ' minutes'); }
    return Math.floor(minutes / 60) + ' h ' + ('0' + (minutes % 60)).slice(-2) + ' min';
  }
  var TOAST_LIMIT = 140;  // JupyterLab cuts a toast's message after this many characters

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (key === 'text') { node.textContent = attrs[key]; } else { node.setAttribute(key, attrs[key]); }
    });
    (children || []).forEach(function (child) { node.appendChild(child); });
    return node;
  }

  function makePlugin(mods) {
    var apputils = mods['@jupyterlab/apputils'], services = mods['@jupyterlab/services'];
    var coreutils = mods['@jupyterlab/coreutils'], widgets = mods['@lumino/widgets'];
    var mainmenu = mods['@jupyterlab/mainmenu'], launcher = mods['@jupyterlab/launcher'];
    var icons = mods['@jupyterlab/ui-components'];

    function settings() { return services.ServerConnection.makeSettings(); }
    function api(path, init) {
      var s = settings();
      return services.ServerConnection.makeRequest(coreutils.URLExt.join(s.baseUrl, path), init || {}, s);
    }
    /* A toast; a message longer than a toast shows whole keeps its first sentence there and the
       rest behind "Read all". */
    function notify(kind, message, options) {
      var N = apputils.Notification;
      if (!N || typeof N[kind] !== 'function') {
        return apputils.showDialog({ title: message, buttons: [apputils.Dialog.okButton()] });
      }
      options = options || { autoClose: 12000 };
      if (message.length > TOAST_LIMIT) {
        var first = (/^.*?[.!?](\s|$)/.exec(message) || [message])[0].trim();
        var whole = message;
        message = first.length <= TOAST_LIMIT ? first : first.slice(0, TOAST_LIMIT - 1) + '…';
        options = Object.assign({}, options, { actions: (options.actions || []).concat([{ label: 'Read all',
          callback: function () {
            apputils.showDialog({ title: first.length <= 80 ? first : 'Message', buttons: [apputils.Dialog.okButton()],
              body: new widgets.Widget({ node: el('div', { 'class': 'attention-message' }, [el('p', { text: whole })]) }) });
          } }]) });
      }
      return N[kind](message, options);
    }

    /* A refused submit, in a dialog a student can read: the reason, the next graded attempt in
       their time zone, and that nothing was handed in. */
    function showRefusal(assignment, body) {
      var refusal = body.refusal, paragraphs = [];
      if (refusal && refusal.next_graded_attempt) {
        paragraphs.push(el('p', { 'class': 'attention-refusal-reason', text: refusal.reason }));
        paragraphs.push(el('p', { 'class': 'attention-refusal-next', text: 'Your next graded attempt is possible at ' +
          when(refusal.next_graded_attempt) + ' (in ' + until(refusal.next_graded_attempt) + ').' }));
        paragraphs.push(el('p', { text: 'Under this assignment’s policy only graded attempts count, so nothing was ' +
          'handed in and your files are unchanged. Submit stays off until then; the “Feedback on submit” panel ' +
          'shows your attempts so far.' }));
      } else {
        paragraphs.push(el('p', { 'class': 'attention-refusal-reason', text: String(body.value || 'The submit failed.') }));
      }
      return apputils.showDialog({
        title: 'Not submitted: “' + assignment + '”',
        body: new widgets.Widget({ node: el('div', { 'class': 'attention-message attention-refusal' }, paragraphs) }),
        buttons: [apputils.Dialog.okButton({ label: 'OK' })]
      });
    }

    var refusedAnswers = new WeakSet();  // answers to a refused submit, already shown in a dialog

    /* nbgrader's list is answered with its current listing (so it shows no dialog of its own) once
       the refusal is in the course's dialog; if the listing cannot be had, with the refusal. */
    function answerRefusal(submitted, body) {
      showRefusal(submitted.assignment_id || '', body);
      var refusedAnswer = function () {
        return new Response(JSON.stringify(body), { status: 200, headers: { 'Content-Type': 'application/json' } });
      };
      return api('assignments?course_id=' + encodeURIComponent(submitted.course_id || courseId)).then(function (response) {
        return response.clone().json().then(function (listing) {
          if (!response.ok || !listing || listing.success !== true) { return refusedAnswer(); }
          refusedAnswers.add(response);
          return response;
        });
      }, refusedAnswer);
    }
    function filesUrl(path) {
      var s = settings();
      return coreutils.URLExt.join(s.baseUrl, 'files', coreutils.URLExt.encodeParts(path));
    }

    /* ---------------------------------------------------------------- Validate */
    function validationBody(report) {
      var ok = report.ok;
      var node = el('div', { 'class': 'attention-validate', 'data-ok': ok ? 'true' : 'false' }, [
        el('p', { 'class': 'attention-validate-headline' }, [
          el('span', { 'class': 'attention-validate-mark', text: ok ? '✓' : '✗' }),
          el('span', { text: report.headline })
        ])
      ]);
      if (report.problems && report.problems.length) {
        node.appendChild(el('ul', { 'class': 'attention-validate-problems' }, report.problems.map(function (p) {
          return el('li', { 'data-kind': p.kind, 'data-cell': String(p.cell), text: p.text });
        })));
      }
      if (report.public_checks && report.public_checks.length) {
        node.appendChild(el('p', { text: 'Public checks:' }));
        node.appendChild(el('ul', { 'class': 'attention-validate-checks' }, report.public_checks.map(function (c) {
          return el('li', { 'data-passed': c.passed ? 'true' : 'false', text: c.text });
        })));
      }
      node.appendChild(el('p', { 'class': 'attention-validate-note', text: report.note }));
      return new widgets.Widget({ node: node });
    }

    /* The notebooks open in the main area whose path is `path` or lies in the folder `path`/. */
    function openNotebooks(path) {
      return Array.from(app.shell.widgets('main')).filter(function (widget) {
        var at = widget.context && widget.context.path;
        return !!at && /\.ipynb$/.test(at) && (at === path || at.indexOf(path + '/') === 0);
      });
    }

    /* Saves the open notebooks under `path` that have unsaved edits; resolves to a refusal or ''. */
    function saveOpen(path) {
      var dirty = openNotebooks(path).filter(function (w) { return w.context.model && w.context.model.dirty; });
      return Promise.all(dirty.map(function (w) {
        return w.context.save().then(function () {
          return w.context.model.dirty ? w.context.path + ' still has unsaved changes' : '';
        }, function (error) { return w.context.path + ' could not be saved (' + String(error.message || error) + ')'; });
      })).then(function (problems) { return problems.filter(Boolean).join('; '); });
    }

    function validatePath(path) {
      return saveOpen(path).then(function (problem) {
        if (problem) { throw new Error(problem + '. Save it (File ▸ Save Notebook) and validate again.'); }
        return api('attention/validate', { method: 'POST', body: JSON.stringify({ path: path }) });
      }).then(function (response) {
        return response.json().then(function (body) {
          if (!response.ok) { throw new Error(body.message || ('Validate failed: ' + response.status)); }
          return body;
        });
      }).then(function (report) {
        apputils.showDialog({
          title: 'Validate: ' + report.notebook, body: validationBody(report),
          buttons: [apputils.Dialog.okButton({ label: 'OK' })]
        });
        return report;
      }, function (error) {
        apputils.showDialog({
          title: 'Validate could not run', body: new widgets.Widget({ node: el('p', { text: String(error.message || error) }) }),
          buttons: [apputils.Dialog.okButton()]
        });
        return null;
      });
    }

    function validate(panel) { return validatePath(panel.context.path); }

    /* ---------------------------------------------------------------- nbgrader's Assignments list */
    var listed = [];  // nbgrader's newest listing: each assignment's folder and notebooks' paths
    var courseId = '';  // the course of this hub (page config), whose listing is asked for if none was seen

    function remember(body) {
      if (body && body.success === true && Array.isArray(body.value)) { listed = body.value; }
    }

    /* nbgrader's row ids: "nbgrader-<course>-<assignment>", spaces to _, then only [A-Za-z0-9_-]. */
    function rowId(a) {
      return ('nbgrader-' + a.course_id + '-' + a.assignment_id).replace(/ /g, '_').replace(/[^A-Za-z0-9\-_]/g, '');
    }

    function listedNotebook(containerId, notebookId) {
      for (var i = 0; i < listed.length; i++) {
        var a = listed[i];
        if (a.status !== 'fetched' || rowId(a) !== containerId) { continue; }
        var nb = (a.notebooks || []).filter(function (n) { return n.notebook_id === notebookId; })[0];
        if (nb) { return nb.path; }
      }
      return '';
    }

    /* The list's own Validate posts to nbgrader's validate extension, which the course replaces:
       its click is taken here, before nbgrader's handler, and runs the course's Validate. */
    function takeListValidate(event) {
      var button = event.target && event.target.closest &&
        event.target.closest('#nbgrader-assignment-list .nested_list_item button');
      if (!button || button.textContent.trim() !== 'Validate') { return; }
      event.preventDefault();
      event.stopImmediatePropagation();
      var row = button.closest('.nested_list_item'), container = row.closest('.assignment-notebooks');
      var link = row.querySelector('.item_name a');
      var containerId = container ? container.id : '', notebookId = link ? link.textContent : '';
      var path = listedNotebook(containerId, notebookId);
      var found = path ? Promise.resolve(path) : api('assignments?course_id=' + encodeURIComponent(courseId))
        .then(function (response) { return response.json(); })
        .then(function (body) { remember(body); return listedNotebook(containerId, notebookId); }, function () { return ''; });
      found.then(function (at) { validateListed(button, at); });
    }

    function validateListed(button, path) {
      if (!path) {
        apputils.showDialog({ title: 'Validate could not run', buttons: [apputils.Dialog.okButton()],
          body: new widgets.Widget({ node: el('p', { text: 'This notebook is not in the list any more: refresh the list and try again.' }) }) });
        return;
      }
      button.disabled = true;
      button.textContent = 'Validating…';
      validatePath(path).then(function (report) {
        button.disabled = false;
        button.textContent = 'Validate';
        button.classList.remove('btn-default', 'btn-success', 'btn-danger');
        button.classList.add(!report ? 'btn-default' : report.ok ? 'btn-success' : 'btn-danger');
      });
    }

    /* Submit hands in the files on disk: the assignment's open notebooks are saved first. */
    function saveBeforeSubmit(init) {
      var body = {};
      try { body = JSON.parse(init.body || '{}'); } catch (e) { /* a form post: nothing to match */ }
      var entry = listed.filter(function (a) {
        return a.status === 'fetched' && a.assignment_id === body.assignment_id && a.course_id === body.course_id;
      })[0];
      var folder = entry ? entry.path : body.assignment_id;
      if (!folder) { return Promise.resolve(''); }
      return saveOpen(folder).then(function (problem) {
        return problem ? 'Nothing was handed in: ' + problem + '. Save your notebooks (File ▸ Save All) and submit again.' : '';
      });
    }

    function validateButton(panel) {
      var button = new apputils.ToolbarButton({
        label: 'Validate', className: 'attention-validate-button',
        tooltip: 'Run this notebook and list what is still to do (the hidden checks run after you submit)',
        onClick: function () {
          button.enabled = false;
          var done = function () { button.enabled = true; };
          validate(panel).then(done, done);
        }
      });
      return button;
    }

    /* ---------------------------------------------------------------- fetch / submit */
    var app = null;  // set when the plugin activates

    /* `asked`: the posted {course_id, assignment_id}. nbgrader answers with the whole list: only the
       assignment acted on is confirmed, not every other one the student has fetched or submitted. */
    function confirmAssignmentAction(url, response, asked) {
      var match = /\/assignments\/(fetch_feedback|fetch|submit)$/.exec(url.split('?')[0]);
      if (!match || !response.ok || refusedAnswers.has(response)) { return; }
      var action = match[1];
      response.clone().json().then(function (body) {
        if (!body || body.success !== true || !Array.isArray(body.value)) { return; }
        remember(body);
        var actedOn = body.value.filter(function (a) {
          return a.assignment_id === asked.assignment_id && (!asked.course_id || a.course_id === asked.course_id);
        });
        var fetched = actedOn.filter(function (a) { return a.status === 'fetched'; });
        var submitted = actedOn.filter(function (a) { return a.status === 'submitted'; });
        if (action === 'fetch') {
          fetched.forEach(function (a) {
            var first = a.notebooks && a.notebooks[0];
            var part1 = first ? a.path + '/' + first.notebook_id + '.ipynb' : '';
            notify('success', 'Fetched “' + a.assignment_id + '”: ' + (a.notebooks || []).length +
              ' notebooks are in your folder ' + a.path + '/.' + (first ? ' Start with ' + first.notebook_id + '.ipynb (part 1).' : ''),
              { autoClose: 20000, actions: part1 ? [{ label: 'Open part 1', callback: function () {
                app.commands.execute('docmanager:open', { path: part1 });
              } }] : [] });
          });
        } else if (action === 'submit') {
          submitted.forEach(function (a) {
            var last = (a.submissions || [])[a.submissions.length - 1];
            if (last && a.nothing_new_filed) {
              notify('info', 'Nothing new was filed for “' + a.assignment_id + '”: your files match your ' +
                'submission of ' + when(last.timestamp) + '. Save changes, then submit.', { autoClose: 20000 });
            } else if (last) {
              // Under feedback on submit the instructor's policy says which attempt counts, and the
              // panel of attention-feedback-on-submit (when the assignment has one) shows it: say so
              // rather than "your last submission is the one graded", which is the stock rule only.
              var onSubmit = document.querySelector('#feedback_on_submit_panel [data-assignment="' +
                String(a.assignment_id).replace(/["\\]/g, '') + '"]');
              notify('success', 'Submitted “' + a.assignment_id + '” at ' + when(last.timestamp) + '. ' + (onSubmit ?
                'Its result appears under “Feedback on submit” within seconds.' :
                'Your last submission before the deadline is graded.'));
            }
          });
        } else {
          submitted.forEach(function (a) {
            var withFeedback = (a.submissions || []).filter(function (s) { return s.has_local_feedback; });
            var last = withFeedback[withFeedback.length - 1];
            if (!last) {
              notify('info', 'No feedback to fetch for “' + a.assignment_id + '” yet: the course staff have not ' +
                'released any.', { autoClose: 20000 });
            } else {
              notify('success', 'Feedback for “' + a.assignment_id + '” is here.', {
                autoClose: false,
                actions: [{ label: 'Open feedback', callback: function () { openFeedback(last.local_feedback_path, a); } }]
              });
            }
          });
        }
      }, function () { /* not JSON: nbgrader's own error dialog covers it */ });
    }

    function watchAssignmentActions() {
      var connection = services.ServerConnection;
      if (connection.__attentionCourseWatched) { return; }
      var original = connection.makeRequest;
      connection.makeRequest = function (url, init, s) {
        var self = this, args = arguments, request;
        var post = init && String(init.method).toUpperCase() === 'POST';
        var asked = {};
        if (post) {
          try { asked = JSON.parse(init.body || '{}') || {}; } catch (e) { /* a form post: nbgrader's own dialog */ }
        }
        if (post && /\/assignments\/submit(\?|$)/.test(String(url))) {
          request = saveBeforeSubmit(init).then(function (refusal) {
            if (refusal) { return answerRefusal(asked, { success: false, value: refusal }); }
            return original.apply(self, args).then(function (response) {
              if (!response.ok) { return response; }
              return response.clone().json().then(function (body) {
                return body && body.success === false ? answerRefusal(asked, body) : response;
              }, function () { return response; });
            });
          });
        } else {
          request = original.apply(this, arguments);
        }
        if (post && /\/assignments\//.test(String(url))) {
          request.then(function (response) { confirmAssignmentAction(String(url), response, asked); }, function () {});
        } else if (/\/assignments(\?|$)/.test(String(url))) {
          request.then(function (response) {
            if (response.ok) { response.clone().json().then(remember, function () {}); }
          }, function () {});
        }
        return request;
      };
      connection.__attentionCourseWatched = true;
    }

    function openFeedback(folder, assignment) {
      var order = (assignment.notebooks || []).map(function (nb) { return nb.notebook_id; });
      var first = order[0] || assignment.assignment_id;
      window.open(filesUrl(folder + '/' + first + '.html'), '_blank', 'noopener');
    }

    /* ---------------------------------------------------------------- the Course menu */
    return {
      id: NAME + ':plugin',
      autoStart: true,
      optional: [mainmenu.IMainMenu, launcher.ILauncher],
      activate: function (application, mainMenu, launch) {
        app = application;
        var course = coreutils.PageConfig.getOption('attentionCourse');
        try { course = typeof course === 'string' ? JSON.parse(course || '{}') : (course || {}); } catch (e) { course = {}; }
        var role = course.role || 'student';
        courseId = course.course || '';
        document.head.appendChild(el('style', { text: CSS }));
        // nbgrader's lists say they are tab lists and hold no tabs: a screen reader then announces
        // an empty widget; plain containers read as what they are
        var plainLists = function () {
          var root = document.getElementById('nbgrader-assignment-list');
          var lists = root ? root.querySelectorAll('[role=tablist]') : [];
          for (var i = 0; i < lists.length; i++) {
            if (!lists[i].querySelector('[role=tab]')) {
              lists[i].removeAttribute('role');
              lists[i].removeAttribute('aria-multiselectable');
            }
          }
        };
        // nbgrader's list shows each submission's time as the exchange stamped it, in UTC: the
        // student reads it in their own zone, in the one format of every time they read
        var localSubmissionTimes = function () {
          var names = document.querySelectorAll('#submitted_assignments_list .nested_list_item .item_name');
          for (var i = 0; i < names.length; i++) {
            var stamp = names[i].firstChild;
            if (!stamp || stamp.nodeType !== Node.TEXT_NODE || !/ UTC$/.test(stamp.nodeValue.trim())) { continue; }
            var at = instant(stamp.nodeValue);
            if (isNaN(at.getTime())) { continue; }  // not a time: left as nbgrader wrote it
            names[i].replaceChild(el('time', { datetime: at.toISOString(), text: CLOCK.format(at) }), stamp);
          }
        };
        new MutationObserver(function () { plainLists(); localSubmissionTimes(); })
          .observe(document.body, { childList: true, subtree: true });
        var commands = app.commands, items = [];

        commands.addCommand('attention:validate', {
          label: 'Validate this notebook',
          isEnabled: function () { var w = app.shell.currentWidget; return !!(w && w.context && /\.ipynb$/.test(w.context.path)); },
          execute: function () { var w = app.shell.currentWidget; if (w && w.context) { return validate(w); } }
        });
        app.docRegistry.addWidgetExtension('Notebook', { createNew: function (panel) {
          var button = validateButton(panel);
          panel.toolbar.insertItem(10, 'attentionValidate', button);
          return button;
        } });

        if (role === 'student') {
          items.push({ command: 'nbgrader:open-assignment-list', label: 'Your assignments', icon: icons.listIcon });
          items.push({ command: 'attention:validate' });
          watchAssignmentActions();
          document.addEventListener('click', takeListValidate, true);
          app.restored.then(function () {
            // the assignments are the first thing a student sees, unless they were already open
            if (commands.hasCommand('nbgrader:open-assignment-list') && !document.getElementById('nbgrader-assignment-list')) {
              return commands.execute('nbgrader:open-assignment-list');
            }
          });
        }
        if (course.formgraderUrl) {
          commands.addCommand('attention:open-formgrader', {
            label: 'Formgrader (' + course.course + ') — opens in a new tab', icon: icons.launchIcon,
            caption: 'Collect, autograde, grade by hand and release feedback',
            execute: function () { window.open(course.formgraderUrl, '_blank', 'noopener'); }
          });
          items.push({ command: 'attention:open-formgrader' });
        }
        if (course.courseSource) {
          commands.addCommand('attention:open-course-source', {
            label: 'Course source (~/' + course.courseSource + ')', icon: icons.folderIcon,
            caption: 'The instructor notebooks: solutions, hidden checks, rubrics',
            execute: function () { return commands.execute('filebrowser:go-to-path', { path: '/' + course.courseSource + '/' }); }
          });
          items.push({ command: 'attention:open-course-source' });
        }
        items.forEach(function (item) {
          if (item.label && !commands.hasCommand(item.command + ':course')) {
            // a label of our own for a command another plugin owns; its panel is brought to the front
            var target = item.command;
            commands.addCommand(target + ':course', {
              label: item.label, icon: item.icon,
              execute: function () {
                return Promise.resolve(commands.execute(target)).then(function () {
                  if (target === 'nbgrader:open-assignment-list') { app.shell.activateById('nbgrader-assignment-list'); }
                });
              }
            });
            item.command = item.command + ':course';
          }
        });
        if (mainMenu && items.length) {
          var menu = new widgets.Menu({ commands: commands });
          menu.id = 'attention-course-menu';
          menu.title.label = 'Course';
          items.forEach(function (item) { menu.addItem({ command: item.command }); });
          mainMenu.addMenu(menu, true, { rank: 90 });
        }
        if (launch) {
          items.filter(function (item) { return item.command !== 'attention:validate'; }).forEach(function (item, rank) {
            launch.add({ command: item.command, category: 'Course: ' + (course.course || ''), rank: rank });
          });
        }
      }
    };
  }

  var MODULES = ['@jupyterlab/apputils', '@jupyterlab/services', '@jupyterlab/coreutils', '@lumino/widgets',
                 '@jupyterlab/mainmenu', '@jupyterlab/launcher', '@jupyterlab/ui-components'];
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
