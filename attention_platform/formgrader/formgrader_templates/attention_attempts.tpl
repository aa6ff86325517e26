{#- Feedback on submit for the course staff (attention_platform/formgrader/feedback_on_submit.py):
    per assignment the policy and every attempt. Every value is escaped here. -#}
{%- extends 'base.tpl' -%}
{%- block title -%}Feedback on submit{%- endblock -%}
{%- block body -%}
<ol class="breadcrumb"><li class="active">Feedback on submit</li></ol>
<p style="max-width:60rem">Each assignment's policy decides what a student sees when they submit and which of their
graded attempts counts for the grade. Points are the hidden checks'; TAs grade the written answers by hand in
the student's submission, which under "last" and "best" is the counting attempt (in bold). Times are UTC, as
the exchange received each attempt.</p>
{%- if not sections %}<p>No assignment yet.</p>{% endif -%}
{%- for section in sections %}
<h2 id="{{ section.assignment | e }}">{{ section.assignment | e }}</h2>
{%- if section.error %}
<p class="text-danger attention-policy" style="max-width:60rem">Not in force: {{ section.error | e }}</p>
{%- else %}
<p class="attention-policy" style="max-width:60rem" data-feedback="{{ section.policy.feedback | e }}" data-counts="{{ section.policy.counts | e }}">
Students are told: “{{ section.policy.describe() | e }}”</p>
{%- endif %}
<p><a class="attention-policy-link" href="{{ base_url }}/formgrader/policy/{{ section.assignment | e }}">{% if attention_role == 'instructor' %}Change the policy of {{ section.assignment | e }}{% else %}The policy's settings for {{ section.assignment | e }}{% endif %}</a>
 · <a class="attention-attempts-csv" href="{{ base_url }}/formgrader/reports/{{ section.assignment | e }}/attempts.csv">Attempts of {{ section.assignment | e }} as CSV</a></p>
{%- if not section.attempts %}
<p>No attempts.</p>
{%- else %}
{%- if section.summary %}<p>{{ section.summary | e }}</p>{% endif %}
<table class="table table-condensed attempts" data-assignment="{{ section.assignment | e }}">
<thead><tr><th scope="col">student</th><th scope="col">attempt</th><th scope="col">received (UTC)</th><th scope="col">state</th>
<th scope="col">points</th><th scope="col">grading took</th><th scope="col">counting attempt</th><th scope="col">open</th><th scope="col">note</th></tr></thead>
<tbody>
{%- for row in section.attempts %}
<tr class="{% if row.counted %}counted{% endif %}" style="{% if row.counted %}font-weight:600{% endif %}" data-student='{{ row.student | e }}' data-state='{{ row.state | e }}' data-attempt="{{ row.number }}">
<td><a href="{{ base_url }}/formgrader/manage_students/{{ row.student | e }}/{{ section.assignment | e }}">{{ row.student | e }}</a></td>
<td>{{ row.number }}</td><td>{{ row.received | e }}</td><td>{{ row.state | e }}</td><td>{{ row.points | e }}</td>
<td>{{ row.took | e }}</td><td>{% if row.counted %}the counting attempt{% endif %}</td>
<td>{%- for notebook in row.notebooks %}<a class="attention-open-attempt" href="{{ base_url }}/formgrader/attempts/{{ section.assignment | e }}/{{ row.student | e }}/{{ row.id }}/{{ notebook | e }}">{{ notebook | e }}</a>{% if not loop.last %}, {% endif %}{%- endfor %}</td>
<td>{{ row.note | e }}</td></tr>
{%- endfor %}
</tbody></table>
{%- endif %}
{%- endfor %}
{%- endblock -%}
