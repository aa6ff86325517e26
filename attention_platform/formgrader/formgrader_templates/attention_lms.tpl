{#- Grades sent to the LMS and the roster's changes (attention_platform/formgrader/lms_page.py).
    Every value is escaped here: nbgrader's template environment does not escape on its own. -#}
{%- extends 'base.tpl' -%}
{%- block title -%}Grades in the LMS{%- endblock -%}
{%- block body -%}
<h1>Grades in the LMS</h1>
{%- if done %}<div class="alert alert-success" role="status">{{ done | e }}</div>{% endif -%}
{%- if not configured %}
<p id="lms-not-configured">This course sends no grades to an LMS: the LMS sync is not set up (see the instructors' guide, "Grades in the LMS").</p>
{%- else %}
<p>A student's score is sent once it counts: when their feedback is released, or on submit when the assignment's policy counts an attempt (last or best). Written answers still to grade are sent as "pending manual".</p>
<table class="table table-striped" id="lms-scores">
  <caption>Scores in the outbox</caption>
  <thead><tr><th scope="col">Assignment</th><th scope="col">Student</th><th scope="col">Points</th><th scope="col">State</th><th scope="col">Sent</th><th scope="col">The LMS's answer</th>{% if editable %}<th scope="col">Resend</th>{% endif %}</tr></thead>
  <tbody>
  {%- for row in rows %}
  <tr>
    <td>{{ row.assignment | e }}</td><td>{{ row.student | e }}</td>
    <td>{{ '%g' % row.score }} / {{ '%g' % row.maximum }}{% if row.pending_manual %} (pending manual){% endif %}</td>
    <td>{{ row.state_text | e }}{% if row.next %}, next try {{ row.next | e }}{% endif %}</td>
    <td>{{ row.sent | e }}</td><td>{{ row.answer | e }}</td>
    {%- if editable %}
    <td><form method="post" action="{{ base_url }}/formgrader/lms/resend">
      <input type="hidden" name="_xsrf" value="{{ xsrf | e }}">
      <input type="hidden" name="assignment" value="{{ row.assignment | e }}">
      <input type="hidden" name="student" value="{{ row.student | e }}">
      <button type="submit" class="btn btn-default btn-sm" aria-label="Resend the score of {{ row.student | e }} for {{ row.assignment | e }}">Resend</button>
    </form></td>
    {%- endif %}
  </tr>
  {%- else %}
  <tr><td colspan="{% if editable %}7{% else %}6{% endif %}">No score has counted yet.</td></tr>
  {%- endfor %}
  </tbody>
</table>
<h2>Roster</h2>
<table class="table" id="lms-roster-changes">
  <caption>What the roster syncs changed, newest first</caption>
  <thead><tr><th scope="col">When</th><th scope="col">Hub user</th><th scope="col">LMS id</th><th scope="col">Change</th></tr></thead>
  <tbody>
  {%- for change in changes %}
  <tr><td>{{ change.at_text | e }}</td><td>{{ change.user | e }}</td><td>{{ change.lms_id | e }}</td><td>{{ change.change | e }}</td></tr>
  {%- else %}
  <tr><td colspan="4">No change yet.</td></tr>
  {%- endfor %}
  </tbody>
</table>
{%- endif %}
{%- endblock -%}
