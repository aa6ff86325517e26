{#- The Reports page (attention_platform/formgrader/reports.py): per assignment, what the course's
    report and export commands make, made on request. Every value is escaped here. -#}
{%- extends 'base.tpl' -%}
{%- block title -%}Reports{%- endblock -%}
{%- block body -%}
<ol class="breadcrumb"><li class="active">Reports</li></ol>
<p style="max-width:60rem">Each file is made when you open it, from the gradebook as it is now (a large class takes a
few seconds). The same files come from a terminal in the course directory with
<code>attention-course report</code>, <code>export-checks</code>, <code>export-canvas</code> and <code>attempts</code>.</p>
{%- if not assignments %}
<p id="reports-empty">The gradebook has no assignment yet: generate one under Manage Assignments first.</p>
{%- endif %}
{%- for assignment in assignments %}
<h2 id="reports-{{ assignment | e }}">{{ assignment | e }}</h2>
<ul class="attention-reports-list" data-assignment="{{ assignment | e }}">
  <li><a class="report-misconceptions" href="{{ base_url }}/formgrader/reports/{{ assignment | e }}/misconceptions.html">Misconception report</a>
    (<a class="report-misconceptions-download" href="{{ base_url }}/formgrader/reports/{{ assignment | e }}/misconceptions.html?download=1">download</a>):
    what the class got wrong, by idea, and who would benefit from which follow-up</li>
  <li><a class="report-check-breakdown" href="{{ base_url }}/formgrader/reports/{{ assignment | e }}/check_breakdown.csv">Per-check breakdown (CSV)</a>:
    one row per student and hidden check</li>
  <li><a class="report-canvas" href="{{ base_url }}/formgrader/reports/{{ assignment | e }}/canvas_grades.csv">Canvas gradebook (CSV)</a>:
    the layout Canvas's Gradebook import reads</li>
  <li><a class="report-attempts" href="{{ base_url }}/formgrader/reports/{{ assignment | e }}/attempts.csv">Feedback-on-submit attempts (CSV)</a>:
    every attempt, its state, points and whether it counts</li>
</ul>
{%- endfor %}
{%- endblock -%}
