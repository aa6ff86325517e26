{#- Preview (attention_platform/formgrader/preview.py): the released notebooks of one assignment,
    each a link to the student version as generate_assignment wrote it. -#}
{%- extends 'base.tpl' -%}

{%- block title -%}
Preview
{%- endblock -%}

{%- block breadcrumbs -%}
<ol class="breadcrumb">
  <li><a href="{{ base_url }}/formgrader/manage_assignments">Manage Assignments</a></li>
  <li class="active">Preview of {{ assignment_id | e }}</li>
</ol>
{%- endblock -%}

{%- block messages -%}
<p>The student version of <b>{{ assignment_id | e }}</b>, as students receive it: no solutions, no hidden
  checks, no rubrics.</p>
{%- endblock -%}

{%- block table_header -%}
<tr><th scope="col">Notebook</th></tr>
{%- endblock -%}

{%- block table_body -%}
{%- for notebook in notebooks %}
<tr><td><a class="attention-preview-notebook" href="{{ base_url }}/formgrader/attention/preview/{{ assignment_id | urlencode }}/{{ notebook | urlencode }}">{{ notebook | e }}.ipynb</a></td></tr>
{%- else %}
<tr><td>No student version yet: generate it first (the Generate button on Manage Assignments).</td></tr>
{%- endfor %}
{%- endblock -%}
