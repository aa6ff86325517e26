{#- nbgrader's Manage Submissions page with Autograde all (attention_platform/formgrader/autograde_all.py):
    the batch grader over every collected submission, its progress and its summary, where nbgrader's
    page sent the TA to a terminal this service does not serve. autograde_all.js gives the button
    its behaviour (nonced like every script of this folder). A Deadline column after the timestamp:
    on time, late by how much, extension, late days (attention.js fills it from submission_deadlines.py). -#}
{%- extends 'nbgrader/manage_submissions.tpl' -%}

{%- block head -%}
{{ super() }}
<script src="{{ base_url }}/formgrader/attention/static/autograde_all.js" data-base-url="{{ base_url | e }}" data-assignment="{{ assignment_id | e }}"></script>
{%- endblock head -%}

{%- block messages -%}
<section id="attention-autograde-all" class="panel panel-default" aria-labelledby="attention-autograde-all-heading">
  <div class="panel-body">
    <h2 id="attention-autograde-all-heading" style="font-size: 18px; margin-top: 0;">Autograde every submission</h2>
    <p>Grades every collected submission of <b>{{ assignment_id | e }}</b> in the sandbox, several at once.
      A submission that cannot be graded is listed with what to do; the others are graded all the same.</p>
    <button type="button" class="btn btn-primary" id="attention-autograde-all-button">Autograde all</button>
    <p id="attention-autograde-all-status" role="status" aria-live="polite" style="margin-top: 10px;"></p>
    <div id="attention-autograde-all-summary"></div>
  </div>
</section>
{%- endblock -%}

{%- block table_header -%}
<tr>
  <th>Student Name</th>
  <th class="text-center">Student ID</th>
  <th class="text-center">Timestamp</th>
  <th class="text-center attention-deadline-header">Deadline</th>
  <th class="text-center">Status</th>
  <th class="text-center">Score</th>
  <th class="text-center no-sort">Autograde</th>
  <th class="text-center no-sort">Generate Feedback</th>
  <th class="text-center no-sort">Release Feedback</th>
</tr>
{%- endblock -%}

{%- block table_body -%}
<tr><td>Loading, please wait...</td><td></td><td></td><td></td><td></td><td></td><td></td><td></td><td></td></tr>
{%- endblock -%}
