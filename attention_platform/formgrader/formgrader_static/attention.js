/*
 * The course's additions to nbgrader's formgrader pages (attention_platform/formgrader/formgrader_extras.py).
 * Loaded last on every page, after nbgrader's own scripts, with the page's CSP nonce.
 *
 *  - the role (data-role: "instructor" or "grader") decides what is shown; the gate refuses
 *    the rest on the server anyway, and a refusal shows the server's own sentence;
 *  - result dialogs lead with one line, the log folded below it (debug lines dropped);
 *  - autograde shows which notebook it is on and for how long;
 *  - each student's state: needs autograding / needs manual grading (points) / autograded /
 *    feedback generated / feedback released, as a word, not only a colour.
 * Everything is built with text nodes: nothing the server or a student wrote becomes markup.
 */
(function () {
  'use strict';
  var script = document.currentScript;
  var role = (script && script.getAttribute('data-role')) || '';
  var base = (script && script.getAttribute('data-base-url')) || (window.base_url || '');
  var instructor = role === 'instructor';
  var mayExtend = !!(script && script.getAttribute('data-extensions'));
  var page = (location.pathname.split('/formgrader/')[1] || 'formgrader').split('/')[0] || 'formgrader';
  document.body.classList.add('attention-role-' + (role || 'unknown'), 'attention-page-' + page);

  // feedback on submit (attention_platform/formgrader/feedback_on_submit.py): the instructor's policy per
  // assignment and every graded attempt, a link in nbgrader's sidebar (whose templates replace base.tpl's) for TAs and instructors alike
  $(function () {
    var nav = $('.nav.nav-pills.nav-stacked, ul.nav').first();
    if (nav.length && !nav.find('a.attention-feedback-on-submit').length) {
      nav.append($('<li role="presentation"/>').append(
        $('<a/>').addClass('attention-feedback-on-submit').attr('href', base + '/formgrader/feedback_on_submit')
          .text('Feedback on submit')));
    }
    // the Reports page (attention_platform/formgrader/reports.py), TAs and instructors alike
    if (nav.length && !nav.find('a.attention-reports').length) {
      nav.append($('<li role="presentation"/>').append(
        $('<a/>').addClass('attention-reports').attr('href', base + '/formgrader/reports').text('Reports')));
    }
    // the similarity report (attention_platform/formgrader/similarity_page.py), TAs and instructors alike
    if (nav.length && !nav.find('a.attention-similarity').length) {
      nav.append($('<li role="presentation"/>').append(
        $('<a/>').addClass('attention-similarity').attr('href', base + '/formgrader/similarity').text('Similar answers')));
    }
    // students' extensions (attention_platform/formgrader/extensions_page.py): instructors, TAs where the course allows it
    if (nav.length && mayExtend && !nav.find('a.attention-extensions').length) {
      nav.append($('<li role="presentation"/>').append(
        $('<a/>').addClass('attention-extensions').attr('href', base + '/formgrader/extensions').text('Extensions')));
    }
  });

  // the hub's login cookie counts for script requests only with the XSRF token (JupyterHub's rule)
  function getJSON(url) {
    var token = (document.cookie.match(/\b_xsrf=([^;]*)\b/) || [])[1];
    return $.ajax({ url: url, dataType: 'json', headers: token ? { 'X-XSRFToken': token } : {} });
  }

  /* ---------------------------------------------------------------- dialogs */
  function modal(id, title, lines, details) {
    var body = $('<div/>');
    lines.forEach(function (line) { body.append($('<p/>').text(line)); });
    (details || []).forEach(function (d) {
      if (!d.text) { return; }
      var box = $('<details/>').addClass('attention-details');
      box.append($('<summary/>').text(d.label));
      box.append($('<pre/>').addClass('attention-log').text(d.text));
      body.append(box);
    });
    $('.modal').modal('hide');
    return window.createModal(id, title, body);
  }

  function shortLog(log) {
    return String(log || '').split('\n').filter(function (line) {
      return line.trim() && !/^\[DEBUG\]/.test(line);
    }).join('\n');
  }

  // nbgrader's result dialog, with the log folded and its debug lines left out
  if (typeof window.createLogModal === 'function') {
    window.createLogModal = function (id, title, message, log, error) {
      var details = [{ label: 'Log (' + shortLog(log).split('\n').filter(Boolean).length + ' lines)', text: shortLog(log) }];
      if (error) { details.push({ label: 'Error details', text: String(error) }); }
      return modal(id, title, [message], details);
    };
  }

  // a request the gate refused: say who may, in the server's words
  $(document).ajaxError(function (event, xhr) {
    if (xhr.status !== 403) { return; }
    var message = 'You may not do this here.';
    try { message = JSON.parse(xhr.responseText).message || message; } catch (e) { /* not JSON */ }
    modal('refused-modal', 'Not allowed', [message.charAt(0).toUpperCase() + message.slice(1) + '.']);
  });

  /* ---------------------------------------------------------------- per-student states */
  function fetchStates(assignment) {
    return getJSON(base + '/formgrader/api/attention/states/' + encodeURIComponent(assignment));
  }

  function describeStates(states) {
    var names = Object.keys(states).sort();
    var by = function (test) { return names.filter(function (n) { return test(states[n]); }); };
    return {
      names: names,
      submitted: by(function (s) { return s.submitted; }),
      autograded: by(function (s) { return s.autograded; }),
      notAutograded: by(function (s) { return s.submitted && !s.autograded; }),
      generated: by(function (s) { return s.feedback === 'generated' || s.feedback === 'released'; }),
      released: by(function (s) { return s.feedback === 'released'; }),
      waiting: by(function (s) { return s.waiting_points > 0; })
    };
  }

  function list(names) { return names.length ? names.join(', ') : 'nobody'; }

  function feedbackReport(kind, assignment, response) {
    return fetchStates(assignment).then(function (states) {
      var d = describeStates(states), lines = [];
      if (kind === 'generate') {
        lines.push(d.generated.length ? 'Feedback generated for ' + d.generated.length + ' of ' + d.submitted.length +
          ' submissions: ' + list(d.generated) + '.' : 'No feedback was generated: no submission has been autograded yet.');
      } else {
        lines.push(d.released.length ? 'Feedback released to ' + d.released.length + ' of ' + d.submitted.length +
          ' students: ' + list(d.released) + '.' : 'Nothing was released: no submission has generated feedback yet ' +
          '(autograde, then generate feedback, then release).');
      }
      if (d.notAutograded.length) { lines.push('Not autograded yet: ' + list(d.notAutograded) + '.'); }
      if (d.waiting.length) { lines.push('Written answers still to grade by hand: ' + list(d.waiting) + '.'); }
      var nothing = kind === 'release' ? !d.released.length : !d.generated.length;
      return modal(nothing ? 'error-modal' : 'success-modal', nothing ? 'Nothing done' : 'Done',
        (response.success ? [] : ['There was an error.']).concat(lines),
        [{ label: 'Log', text: shortLog(response.log) }, { label: 'Error details', text: response.error || '' }]);
    });
  }

  /* ---------------------------------------------------------------- Manage Assignments */
  // Manual Grading's list defines an AssignmentUI too: its names lead to the per-notebook grading list
  if (page === 'manage_assignments' && window.AssignmentUI && window.AssignmentUI.prototype) {
    var A = window.AssignmentUI.prototype;
    var render = A.render;
    A.render = function () {
      var result = render.apply(this, arguments);
      var name = this.model.get('name');
      var link = this.$name && this.$name.find('a');
      if (link && link.length) {
        // nbgrader links to its own file browser, which this service does not serve
        if (instructor) {
          link.attr('href', base.replace(/\/services\/[^/]+$/, '') + '/hub/user-redirect/lab/tree/course-source/' +
                    encodeURIComponent(name)).attr('target', '_blank').attr('rel', 'noopener')
              .attr('title', 'Open the source in your JupyterLab (~/course-source)');
        } else {
          this.$name.empty().text(name);
        }
      }
      // Preview: the student version, rendered by this service (preview.py)
      var preview = this.$preview && this.$preview.find('a');
      if (preview && preview.length) {
        preview.attr('href', base + '/formgrader/attention/preview/' + encodeURIComponent(name))
          .attr('target', '_blank').attr('rel', 'noopener').attr('title', 'Preview the student version of ' + name)
          .off('click');
      }
      return result;
    };
    // nbgrader says "Successfully collected" even when its log says there was nothing to collect: say
    // which, and how many submissions there are to grade (from the files, as each student's state)
    A.collect_success = function (response) {
      this.model.fetch();
      var result = JSON.parse(response), name = this.model.get('name');
      if (!result.success) {
        return window.createLogModal('error-modal', 'Error', "There was an error collecting '" + name + "':", result.log, result.error);
      }
      if (/No submissions of /.test(String(result.log || ''))) {
        return window.createLogModal('error-modal', 'Nothing collected',
                                     "Nothing to collect: no student has submitted '" + name + "' yet.", result.log);
      }
      return fetchStates(name).then(function (found) {
        var count = describeStates(found).submitted.length;
        window.createLogModal('success-modal', 'Collected', "Collected the submissions of '" + name + "': " + count +
                              (count === 1 ? ' student has' : ' students have') + ' a submission to grade.', result.log);
      });
    };
    ['generate_feedback', 'release_feedback'].forEach(function (action) {
      A[action + '_success'] = function (response) {
        this.model.fetch();
        feedbackReport(action === 'generate_feedback' ? 'generate' : 'release', this.model.get('name'), JSON.parse(response));
      };
    });
  }

  /* ---------------------------------------------------------------- Manage Submissions */
  var states = {};
  function refreshStates() {
    if (typeof window.assignment_id === 'undefined') { return $.Deferred().resolve().promise(); }
    return fetchStates(window.assignment_id).then(function (found) {
      states = found;
      (window.views || []).forEach(function (view) { if (view.showState) { view.showState(); } });
    });
  }

  // each submission against its student's deadline (submission_deadlines.py), in a column after the timestamp
  var deadlines = {};
  function refreshDeadlines() {
    if (typeof window.assignment_id === 'undefined') { return; }
    getJSON(base + '/formgrader/api/attention/deadlines/' + encodeURIComponent(window.assignment_id)).done(function (found) {
      deadlines = found || {};
      (window.views || []).forEach(function (view) { if (view.showDeadline) { view.showDeadline(); } });
      var table = $('#main-table').parent();
      if ($.fn.dataTable && $.fn.dataTable.isDataTable(table)) { table.DataTable().rows().invalidate('dom').draw(false); }
    });
  }
  if (page === 'manage_submissions' && typeof window.insertRow === 'function') {
    var insertRow = window.insertRow;
    window.insertRow = function (table) {
      var row = insertRow(table);
      row.find('td.timestamp').after($('<td/>').addClass('text-center attention-deadline'));
      return row;
    };
  }

  if (window.SubmissionUI && window.SubmissionUI.prototype) {
    var S = window.SubmissionUI.prototype;
    var renderRow = S.render;
    S.render = function () {
      var result = renderRow.apply(this, arguments);
      this.showState();
      this.showDeadline();
      return result;
    };
    S.showDeadline = function () {
      var cell = this.$el.find('td.attention-deadline');
      var d = deadlines.error ? { text: 'deadlines unreadable: ' + deadlines.error, order: -3, state: 'error' }
        : deadlines[this.model.get('student')];
      if (!cell.length || !d) { return; }
      cell.attr('data-order', d.order).attr('data-state', d.state).text(d.text);
    };
    S.showState = function () {
      var s = states[this.model.get('student')];
      if (!s || !this.$status) { return; }
      var order = { 'no submission': 0, 'needs autograding': 1 }[s.state];
      this.$status.empty().attr('data-order', order === undefined ? 2 : order)
        .append($('<span/>').addClass('attention-state attention-state-' + s.state.split(' ')[0]).text(s.state));
    };
    var autograde = S.autograde;
    S.autograde = function () {
      var view = this, student = this.model.get('student'), assignment = this.model.get('name');
      var started = Date.now();
      autograde.apply(this, arguments);
      var line = $('<span/>').addClass('attention-progress').attr('role', 'status').text('Autograding…');
      this.$student_name.empty().append(line);
      var poll = setInterval(function () {
        var seconds = Math.round((Date.now() - started) / 1000);
        getJSON(base + '/formgrader/api/attention/progress/' + encodeURIComponent(assignment) + '/' + encodeURIComponent(student))
          .done(function (p) {
            if (!p) { return; }
            line.text('Autograding ' + (p.notebook ? p.notebook + '.ipynb, ' : '') + 'notebook ' +
                      Math.min(p.done + 1, p.total) + ' of ' + p.total + ' (' + seconds + ' s)');
          });
      }, 1000);
      this.__attentionPoll = poll;
    };
    // one student's feedback: say what actually happened, from the files, not only "Successfully"
    ['generate_feedback', 'release_feedback'].forEach(function (action) {
      S[action + '_success'] = function (response) {
        var student = this.model.get('student');
        var result = JSON.parse(response);
        this.model.fetch();
        refreshStates().then(function () {
          var s = states[student] || {};
          var done = action === 'generate_feedback' ? (s.feedback === 'generated' || s.feedback === 'released')
                                                    : s.feedback === 'released';
          var what = action === 'generate_feedback' ? 'Feedback generated for ' : 'Feedback released to ';
          var why = !s.autograded ? 'the submission has not been autograded yet.'
                    : 'there is no feedback for it yet: generate feedback first.';
          modal(done ? 'success-modal' : 'error-modal', done ? 'Done' : 'Nothing done',
                [done ? what + student + '.' : 'Nothing was done for ' + student + ': ' + why],
                [{ label: 'Log', text: shortLog(result.log) }, { label: 'Error details', text: result.error || '' }]);
        });
      };
    });
    ['autograde', 'generate_feedback', 'release_feedback'].forEach(function (action) {
      ['_success', '_failure'].forEach(function (suffix) {
        var original = S[action + suffix];
        S[action + suffix] = function () {
          if (this.__attentionPoll) { clearInterval(this.__attentionPoll); this.__attentionPoll = null; }
          var result = original.apply(this, arguments);
          refreshStates();
          return result;
        };
      });
    });
    $(window).on('load', function () { refreshStates(); refreshDeadlines(); });
  }

  /* ---------------------------------------------------------------- names for assistive technology */
  // nbgrader's actions are icon-only links; each gets a name saying what it does to which row
  var ICON_ACTIONS = {
    'pencil': 'Edit', 'education': 'Generate', 'search': 'Preview', 'cloud-upload': 'Release',
    'remove': 'Unrelease', 'cloud-download': 'Collect', 'comment': 'Generate feedback',
    'envelope': 'Release feedback', 'flash': 'Autograde', 'eye-open': 'Show names', 'eye-close': 'Hide names'
  };
  function nameControls() {
    $('a, button').filter(function () { return !this.getAttribute('aria-label') && !$(this).text().trim(); })
      .each(function () {
        var icon = $(this).find('.glyphicon').first();
        var glyph = ((icon.attr('class') || '').match(/glyphicon-([a-z-]+)/) || [])[1];
        if (!ICON_ACTIONS[glyph]) { return; }
        icon.attr('aria-hidden', 'true');
        var row = $(this).closest('tr').children('td').first().text().trim();
        $(this).attr('aria-label', ICON_ACTIONS[glyph] + (row ? ' ' + row : ''));
      });
    // nbgrader's collapsible panels are marked up as tabs holding links, and its sidebar's items as
    // presentation: a reader then finds no list and controls inside controls
    $('.panel-heading[role=tab]').removeAttr('role');
    $('.panel-collapse[role=tabpanel]').attr('role', 'region');
    $('[role=tablist]').filter(function () { return !$(this).find('[role=tab]').length; })
      .removeAttr('role aria-multiselectable');
    $('ul.nav > li[role=presentation]').removeAttr('role');
  }
  if (!document.documentElement.lang) { document.documentElement.lang = 'en'; }  // nbgrader's page has no <html>
  $(function () {
    nameControls();
    new MutationObserver(nameControls).observe(document.body, { childList: true, subtree: true });
  });

  /* ---------------------------------------------------------------- hide what this role may not do */
  var style = document.createElement('style');
  style.textContent = instructor ? '' : [
    // Manage Assignments: edit, generate, preview and release are instructors' (the gate refuses them)
    '.attention-page-manage_assignments table.table tr > :nth-child(4),',
    '.attention-page-manage_assignments table.table tr > :nth-child(5),',
    '.attention-page-manage_assignments table.table tr > :nth-child(6),',
    '.attention-page-manage_assignments table.table tr > :nth-child(7),',
    '.attention-page-manage_assignments table.table tfoot { display: none; }',
    // Manage Students: adding and editing students
    '.attention-page-manage_students table.table tfoot,',
    '.attention-page-manage_students table.table tr > :nth-child(5) { display: none; }'
  ].join('\n');
  document.head.appendChild(style);
  // nbgrader's "Add new …" links use inline onClick handlers, which the page's policy never runs
  $(document).on('click', 'tfoot a', function (event) {
    var create = { manage_assignments: window.createAssignmentModal, manage_students: window.createStudentModal }[page];
    if (instructor && typeof create === 'function') { event.preventDefault(); create(); }
  });
  window.attentionFormgrader = { role: role, refreshStates: refreshStates };
})();
