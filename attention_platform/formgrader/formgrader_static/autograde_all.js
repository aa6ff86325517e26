/*
 * Autograde all on Manage Submissions (attention_platform/formgrader/autograde_all.py): the button
 * starts the batch grader (or shows the run already going), its progress is polled every second,
 * and the summary says who was graded, who could not be (and what to do), and whose written
 * answers wait for a TA. Everything is built with text nodes.
 */
(function () {
  'use strict';
  var script = document.currentScript;
  var base = script.getAttribute('data-base-url') || '';
  var assignment = script.getAttribute('data-assignment') || '';
  var api = base + '/formgrader/api/attention/autograde_all/' + encodeURIComponent(assignment);
  var polling = null;

  function request(method) {
    var token = (document.cookie.match(/\b_xsrf=([^;]*)\b/) || [])[1];
    return $.ajax({ url: api, method: method, dataType: 'json', headers: token ? { 'X-XSRFToken': token } : {} });
  }

  function plural(n, one, many) { return n + ' ' + (n === 1 ? one : many); }

  function progressLine(run) {
    if (!run.total) { return 'Autograding all submissions: starting the sandbox…'; }
    var now = run.grading.length ? ' Now grading: ' + run.grading.join(', ') + '.' : '';
    return 'Autograding all submissions: ' + run.done + ' of ' + run.total + ' done (' + run.seconds + ' s).' + now;
  }

  function summary(run) {
    var box = $('#attention-autograde-all-summary').empty();
    var graded = run.outcomes.filter(function (o) { return o.status === 'ok'; });
    var failed = run.outcomes.filter(function (o) { return o.status !== 'ok'; });
    box.append($('<p/>').text('Graded ' + graded.length + ' of ' + plural(run.outcomes.length, 'submission', 'submissions') +
                               ' in ' + run.seconds + ' s.'));
    if (failed.length) {
      box.append($('<h3 style="font-size: 16px;"/>').text('Could not be graded in full (' + failed.length + ')'));
      var list = $('<ul class="attention-autograde-failed"/>');
      failed.forEach(function (o) {
        list.append($('<li/>').append($('<b/>').text(o.student + ': ')).append(document.createTextNode(o.status + ' — ' + o.advice)));
      });
      box.append(list);
    }
    var waiting = Object.keys(run.waiting || {});
    box.append($('<h3 style="font-size: 16px;"/>').text('Needs a TA'));
    if (waiting.length) {
      var names = waiting.map(function (s) { return s + ' (' + plural(run.waiting[s], 'point', 'points') + ')'; });
      box.append($('<p class="attention-autograde-waiting"/>').text('Written answers to grade by hand: ' + names.join(', ') + '. ')
        .append($('<a/>').attr('href', base + '/formgrader/gradebook/' + encodeURIComponent(assignment)).text('Grade them in Manual Grading')));
    } else {
      box.append($('<p class="attention-autograde-waiting"/>').text('No written answer waits for a TA.'));
    }
  }

  function show(run) {
    var status = $('#attention-autograde-all-status'), button = $('#attention-autograde-all-button');
    if (run.state === 'running') {
      button.prop('disabled', true);
      status.text(progressLine(run) + (run.started === false ? ' (a run started earlier; this is its progress)' : ''));
      if (!polling) { polling = setInterval(function () { request('GET').done(show); }, 1000); }
      return;
    }
    if (polling) { clearInterval(polling); polling = null; }
    button.prop('disabled', false);
    if (run.state === 'done') {
      status.text('Autograde all finished.');
      summary(run);
      (window.views || []).forEach(function (view) { if (view.model) { view.model.fetch(); } });
      if (window.attentionFormgrader) { window.attentionFormgrader.refreshStates(); }
    } else if (run.state === 'refused') {
      status.text('Nothing was graded: ' + run.reason);
    } else if (run.state === 'crashed') {
      status.text('Autograde all stopped: ' + run.reason);
    }
  }

  $(function () {
    $('#attention-autograde-all-button').on('click', function () {
      $(this).prop('disabled', true);
      $('#attention-autograde-all-summary').empty();
      $('#attention-autograde-all-status').text('Autograding all submissions: starting…');
      request('POST').done(show).fail(function (xhr) {
        $('#attention-autograde-all-button').prop('disabled', false);
        $('#attention-autograde-all-status').text('Autograde all could not start (' + xhr.status + '): try again, or ask an instructor.');
      });
    });
    request('GET').done(function (run) { if (run.state === 'running') { show(run); } });
  });
})();
