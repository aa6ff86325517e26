{#- The feedback-on-submit policy of one assignment (attention_platform/formgrader/policy_form.py).
    Every value is escaped here: nbgrader's template environment does not escape on its own. -#}
{%- extends 'base.tpl' -%}
{%- block title -%}Feedback on submit: {{ assignment | e }}{%- endblock -%}
{%- block body -%}
<ol class="breadcrumb">
  <li><a href="{{ base_url }}/formgrader/feedback_on_submit">Feedback on submit</a></li>
  <li class="active">{{ assignment | e }}</li>
</ol>
{%- if saved %}<div class="alert alert-success" role="status">{{ saved | e }}</div>{% endif -%}
{%- if error %}<div class="alert alert-danger" role="alert" id="policy-error"><strong>Not saved:</strong> {{ error | e }}</div>{% endif -%}
<h2>In force</h2>
{%- if not_in_force %}
<p class="text-danger" id="policy-in-force">Not in force: {{ not_in_force | e }}</p>
{%- else %}
<p id="policy-in-force">{{ in_force | e }}</p>
{%- endif %}
<p id="policy-source">{{ source | e }}</p>
<h2>{% if editable %}Change it{% else %}The policy's settings{% endif %}</h2>
{%- if not editable %}
<p>Only the course's instructors change the policy; TAs see it here.</p>
{%- endif %}
<form method="post" action="{{ base_url }}/formgrader/policy/{{ assignment | e }}" class="attention-policy-form" style="max-width:48rem">
  <input type="hidden" name="_xsrf" value="{{ xsrf | e }}">
  <fieldset{% if not editable %} disabled{% endif %}>
  <div class="form-group">
    <label for="policy-feedback">What a student sees on submit</label>
    <select class="form-control" id="policy-feedback" name="feedback">
      {%- for value, text in feedback_choices.items() %}
      <option value="{{ value | e }}"{% if values.feedback == value %} selected{% endif %}>{{ text | e }}</option>
      {%- endfor %}
    </select>
  </div>
  <div class="form-group">
    <label for="policy-attempts">Graded attempts per window</label>
    <input class="form-control" id="policy-attempts" name="attempts" inputmode="numeric" value="{{ values.attempts | e }}" aria-describedby="policy-attempts-help">
    <p class="help-block" id="policy-attempts-help">A whole number, at least 1; empty: no limit.</p>
  </div>
  <div class="form-group">
    <label for="policy-window">Window, in hours</label>
    <input class="form-control" id="policy-window" name="window_hours" inputmode="decimal" value="{{ values.window_hours | e }}" aria-describedby="policy-window-help">
    <p class="help-block" id="policy-window-help">The rolling window the attempts are counted in (24: a day).</p>
  </div>
  <div class="form-group">
    <label for="policy-cooldown">Cooldown, in minutes</label>
    <input class="form-control" id="policy-cooldown" name="cooldown_minutes" inputmode="decimal" value="{{ values.cooldown_minutes | e }}" aria-describedby="policy-cooldown-help">
    <p class="help-block" id="policy-cooldown-help">The least time between two graded attempts; 0: none.</p>
  </div>
  <div class="form-group">
    <label for="policy-counts">The attempt that counts for the grade</label>
    <select class="form-control" id="policy-counts" name="counts">
      {%- for value, text in counts_choices.items() %}
      <option value="{{ value | e }}"{% if values.counts == value %} selected{% endif %}>{{ text | e }}</option>
      {%- endfor %}
    </select>
  </div>
  {%- if editable %}
  <button type="submit" class="btn btn-primary" name="action" value="save">Save the policy</button>
  <button type="submit" class="btn btn-default" name="action" value="reset">Use the course configuration's</button>
  {%- endif %}
  </fieldset>
</form>
<h2 id="late-policy">Late policy</h2>
{%- if late_error %}<div class="alert alert-danger" role="alert" id="late-policy-error"><strong>Not saved:</strong> {{ late_error | e }}</div>{% endif -%}
{%- if late_not_in_force %}
<p class="text-danger" id="late-policy-in-force">Not in force: {{ late_not_in_force | e }}</p>
{%- elif late_in_force %}
<p id="late-policy-in-force">{{ late_in_force | e }}</p>
{%- else %}
<p id="late-policy-in-force">None: nbgrader's behaviour (late submissions are accepted and marked late).</p>
{%- endif %}
<p class="attention-sentence-links">It applies from each student's own deadline: the class's, or their extension
{%- if attention_may_extend %} (<a href="{{ base_url }}/formgrader/extensions/{{ assignment | e }}">the extensions of {{ assignment | e }}</a>){% endif %}.</p>
<form method="post" action="{{ base_url }}/formgrader/policy/{{ assignment | e }}#late-policy" class="attention-late-policy-form" style="max-width:48rem">
  <input type="hidden" name="_xsrf" value="{{ xsrf | e }}">
  <fieldset{% if not editable %} disabled{% endif %}>
  <div class="form-group">
    <label for="late-kind">After the deadline</label>
    <select class="form-control" id="late-kind" name="kind">
      {%- for value, text in late_kind_choices.items() %}
      <option value="{{ value | e }}"{% if late_values.kind == value %} selected{% endif %}>{{ text | e }}</option>
      {%- endfor %}
    </select>
  </div>
  <div class="form-group">
    <label for="late-penalty">Penalty, percent of the score (penalty)</label>
    <input class="form-control" id="late-penalty" name="penalty_percent" inputmode="decimal" value="{{ late_values.penalty_percent | e }}">
  </div>
  <div class="form-group">
    <label for="late-per">For each (penalty)</label>
    <select class="form-control" id="late-per" name="per">
      {%- for value, text in late_per_choices.items() %}
      <option value="{{ value | e }}"{% if late_values.per == value %} selected{% endif %}>{{ text | e }} begun</option>
      {%- endfor %}
    </select>
  </div>
  <div class="form-group">
    <label for="late-max">At most, percent (penalty)</label>
    <input class="form-control" id="late-max" name="max_penalty_percent" inputmode="decimal" value="{{ late_values.max_penalty_percent | e }}">
  </div>
  <div class="form-group">
    <label for="late-cutoff">Accepted until, hours after the deadline (penalty)</label>
    <input class="form-control" id="late-cutoff" name="cutoff_hours" inputmode="decimal" value="{{ late_values.cutoff_hours | e }}" aria-describedby="late-cutoff-help">
    <p class="help-block" id="late-cutoff-help">Empty: no cut-off.</p>
  </div>
  <div class="form-group">
    <label for="late-budget">Late days per student, for the whole course (late days)</label>
    <input class="form-control" id="late-budget" name="late_days_budget" inputmode="numeric" value="{{ late_values.late_days_budget | e }}">
  </div>
  {%- if editable %}
  <button type="submit" class="btn btn-primary" name="action" value="late-save">Save the late policy</button>
  <button type="submit" class="btn btn-default" name="action" value="late-reset">No late policy</button>
  {%- endif %}
  </fieldset>
</form>
<h2 id="variants-heading">Each student's own numbers</h2>
<p id="variants-state">{{ variants_state | e }}</p>
{%- if variants_offered and editable %}
<form method="post" action="{{ base_url }}/formgrader/policy/{{ assignment | e }}" class="attention-variants-form" style="max-width:48rem">
  <input type="hidden" name="_xsrf" value="{{ xsrf | e }}">
  <button type="submit" class="btn btn-default" name="action" value="variants-on">Give each student their own numbers</button>
  <button type="submit" class="btn btn-default" name="action" value="variants-off">Give everyone the release's numbers</button>
  <div class="checkbox">
    <label><input type="checkbox" name="confirm" value="yes"> Make a new key even though submissions exist
      (their hidden checks would then judge numbers they never saw)</label>
  </div>
  <button type="submit" class="btn btn-default" name="action" value="variants-regenerate">New key: every student's numbers change</button>
</form>
{%- endif %}
{%- endblock -%}
