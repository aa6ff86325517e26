{#- nbgrader's base page with the course's additions (attention_platform/formgrader/formgrader_extras.py).
    Every page of the formgrader extends 'base.tpl', which the loader finds here first. The
    script carries the page's nonce (NonceScripts covers this folder) and learns the role from
    its data attributes: no inline script, no inline handler. The course's own pages are linked
    in the sidebar here; nbgrader's page templates replace this block, so attention.js adds the same
    links to theirs (and adds none a page already has). -#}
{%- extends 'nbgrader/base.tpl' -%}
{%- block sidebar -%}
{{ super() }}
<li role="presentation"><a class="attention-feedback-on-submit" href="{{ base_url }}/formgrader/feedback_on_submit">Feedback on submit</a></li>
<li role="presentation"><a class="attention-reports" href="{{ base_url }}/formgrader/reports">Reports</a></li>
<li role="presentation"><a class="attention-similarity" href="{{ base_url }}/formgrader/similarity">Similar answers</a></li>
{%- if attention_may_extend %}
<li role="presentation"><a class="attention-extensions" href="{{ base_url }}/formgrader/extensions">Extensions</a></li>
{%- endif %}
{%- endblock -%}
{%- block script -%}
{{ super() }}
<link rel="stylesheet" href="{{ base_url }}/formgrader/attention/static/attention.css">
<script src="{{ base_url }}/formgrader/attention/static/attention.js" data-role="{{ attention_role | default('', true) | e }}" data-extensions="{{ 'yes' if attention_may_extend else '' }}" data-base-url="{{ base_url | e }}"></script>
{%- endblock -%}
