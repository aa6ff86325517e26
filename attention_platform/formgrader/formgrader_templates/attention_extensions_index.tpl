{#- Students' extensions, every assignment (attention_platform/formgrader/extensions_page.py).
    Every value is escaped here: nbgrader's template environment does not escape on its own. -#}
{%- extends 'base.tpl' -%}
{%- block title -%}Extensions{%- endblock -%}
{%- block body -%}
<ol class="breadcrumb"><li class="active">Extensions</li></ol>
<p style="max-width:60rem">An extension gives one student a later deadline on one assignment, with a reason kept for
the record. The late policy of each assignment (set beside its feedback-on-submit policy) applies from the
student's own deadline. Times are UTC.</p>
{%- if error %}<div class="alert alert-danger" role="alert">{{ error | e }}</div>{% endif -%}
{%- if not rows %}<p>No assignment yet.</p>{% else %}
<table class="table table-condensed attention-extensions-index">
<thead><tr><th scope="col">assignment</th><th scope="col">due (UTC)</th><th scope="col">late policy</th>
<th scope="col">extensions</th></tr></thead>
<tbody>
{%- for row in rows %}
<tr data-assignment="{{ row.assignment | e }}"><td><a href="{{ base_url }}/formgrader/extensions/{{ row.assignment | e }}">{{ row.assignment | e }}</a></td>
<td>{{ row.due | e }}</td><td>{{ row.policy | e }}</td><td>{{ row.extensions }}</td></tr>
{%- endfor %}
</tbody></table>
{%- endif %}
{%- endblock -%}
