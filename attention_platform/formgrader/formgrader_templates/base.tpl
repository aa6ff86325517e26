{#- nbgrader's base page with the course's additions (attention_platform/formgrader/formgrader_extras.py).
    Every page of the formgrader extends 'base.tpl', which the loader finds here first. The
    script carries the page's nonce (NonceScripts covers this folder) and learns the role from
    its data attributes: no inline script, no inline handler. -#}
{%- extends 'nbgrader/base.tpl' -%}
{%- block script -%}
{{ super() }}
<link rel="stylesheet" href="{{ base_url }}/formgrader/attention/static/attention.css">
<script src="{{ base_url }}/formgrader/attention/static/attention.js" data-role="{{ attention_role | default('', true) | e }}" data-base-url="{{ base_url | e }}"></script>
{%- endblock -%}
