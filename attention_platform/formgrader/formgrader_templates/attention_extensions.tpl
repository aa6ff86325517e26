{#- Students' extensions on one assignment (attention_platform/formgrader/extensions_page.py): those in
    force, grant or revoke one, import a list, the change log. Every value is escaped here. -#}
{%- extends 'base.tpl' -%}
{%- block title -%}Extensions: {{ assignment | e }}{%- endblock -%}
{%- block body -%}
<ol class="breadcrumb">
  <li><a href="{{ base_url }}/formgrader/extensions">Extensions</a></li>
  <li class="active">{{ assignment | e }}</li>
</ol>
{%- if done %}<div class="alert alert-success" role="status" id="extensions-done">{{ done | e }}</div>{% endif -%}
{%- if error %}<div class="alert alert-danger" role="alert" id="extensions-error"><strong>Not saved:</strong> {{ error | e }}
{%- if errors %}<ul class="attention-import-errors">{% for line in errors %}<li>{{ line | e }}</li>{% endfor %}</ul>{% endif %}</div>{% endif -%}
<p id="extensions-class-due" class="attention-sentence-links">The class's deadline: {% if class_due %}{{ class_due | e }}{% else %}none (set a due date in Manage Assignments){% endif %}.
Late policy: {% if policy %}{{ policy | e }}{% else %}none (nbgrader's: late submissions are marked late){% endif %}
<a href="{{ base_url }}/formgrader/policy/{{ assignment | e }}">(the policies of {{ assignment | e }})</a></p>

<h2>In force</h2>
{%- if not extensions %}
<p>No student has an extension on {{ assignment | e }}.</p>
{%- else %}
<table class="table table-condensed attention-extensions">
<thead><tr><th scope="col">student</th><th scope="col">new deadline (UTC)</th><th scope="col">reason</th>
<th scope="col">granted by</th><th scope="col">on (UTC)</th><th scope="col"><span class="sr-only">revoke</span></th></tr></thead>
<tbody>
{%- for row in extensions %}
<tr data-student="{{ row.student | e }}"><td>{{ row.student | e }}</td><td>{{ row.due | e }}</td><td>{{ row.reason | e }}</td>
<td>{{ row.granted_by | e }}</td><td>{{ row.granted_at | e }}</td>
<td><form method="post" action="{{ base_url }}/formgrader/extensions/{{ assignment | e }}">
<input type="hidden" name="_xsrf" value="{{ xsrf | e }}"><input type="hidden" name="student" value="{{ row.student | e }}">
<button type="submit" class="btn btn-default btn-xs" name="action" value="revoke" aria-label="Revoke the extension of {{ row.student | e }}">Revoke</button></form></td></tr>
{%- endfor %}
</tbody></table>
{%- endif %}

<h2>Grant an extension</h2>
<form method="post" action="{{ base_url }}/formgrader/extensions/{{ assignment | e }}" class="attention-grant-form" style="max-width:48rem">
  <input type="hidden" name="_xsrf" value="{{ xsrf | e }}">
  <div class="form-group">
    <label for="extension-student">Student</label>
    <input class="form-control" id="extension-student" name="student" list="extension-students" required value="{{ values.student | e }}">
    <datalist id="extension-students">{% for student in students %}<option value="{{ student | e }}">{% endfor %}</datalist>
  </div>
  <div class="form-group">
    <label for="extension-due">New deadline, UTC</label>
    <input class="form-control" id="extension-due" name="due" type="datetime-local" value="{{ values.due | e }}" aria-describedby="extension-due-help">
    <p class="help-block" id="extension-due-help">Or leave it empty and give the hours added to the class's deadline below.</p>
  </div>
  <div class="form-group">
    <label for="extension-hours">Extra hours</label>
    <input class="form-control" id="extension-hours" name="extra_hours" inputmode="decimal" value="{{ values.extra_hours | e }}" aria-describedby="extension-hours-help">
    <p class="help-block" id="extension-hours-help">48: two days after the class's deadline.</p>
  </div>
  <div class="form-group">
    <label for="extension-reason">Reason, kept for the record (the student does not see it)</label>
    <input class="form-control" id="extension-reason" name="reason" required maxlength="500" value="{{ values.reason | e }}">
  </div>
  <button type="submit" class="btn btn-primary" name="action" value="grant">Grant the extension</button>
</form>

<h2>Import a list</h2>
<form method="post" action="{{ base_url }}/formgrader/extensions/{{ assignment | e }}" enctype="multipart/form-data" class="attention-import-form" style="max-width:48rem">
  <input type="hidden" name="_xsrf" value="{{ xsrf | e }}">
  <div class="form-group">
    <label for="extension-list">Accommodations list (CSV)</label>
    <input id="extension-list" name="{{ upload_field | e }}" type="file" accept=".csv,text/csv" required aria-describedby="extension-list-help">
    <p class="help-block" id="extension-list-help">A header row, then one row per extension: <code>student,assignment,due,reason</code>
    (due as 2026-12-01T23:59:00+01:00), or <code>extra_hours</code> instead of <code>due</code>. Every row is granted,
    or none when any row cannot be used: each such row is named with its line.</p>
  </div>
  <button type="submit" class="btn btn-default" name="action" value="import">Import the list</button>
</form>

<h2>Change log</h2>
{%- if not log %}
<p>No change yet.</p>
{%- else %}
<table class="table table-condensed attention-extensions-log">
<thead><tr><th scope="col">when (UTC)</th><th scope="col">who</th><th scope="col">student</th><th scope="col">what</th><th scope="col">why</th></tr></thead>
<tbody>
{%- for row in log %}
<tr><td>{{ row.at | e }}</td><td>{{ row.by | e }}</td><td>{{ row.student | e }}</td><td>{{ row.what | e }}</td><td>{{ row.why | e }}</td></tr>
{%- endfor %}
</tbody></table>
{%- endif %}
{%- endblock -%}
