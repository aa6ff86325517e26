"""An assignment's feedback-on-submit policy as a form in the formgrader (behind formgrader_gate.py).

``formgrader/policy/<assignment>``: GET shows the policy in force and where it comes from, to TAs
(read only) and instructors; POST (instructors only, the gate checks it for every request, the
server's XSRF check covers the form) saves it with attempts/policy_store.py, checked as the grader
will read it. A value the grader could not use is answered with the form, the sentence saying what to
change, and nothing saved. "Use the course configuration" forgets the form's policy: the assignment
takes nbgrader_config.py's again. The assignment's late policy has its own form on the same page
(late_policy_form.py), posted here with ``action`` late-save or late-reset. The same page switches
the assignment's per-student numbers (attention_platform/course/variants.py) on or off, writing or
removing each student's own copy in the exchange, and makes a new course key (refused while
submissions exist, unless the instructor confirms).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

from tornado import web

from attention_platform.attempts import policy_store
from attention_platform.attempts.policy import COUNTS, FEEDBACK_LEVELS, POLICY_KEYS, Policy, PolicyError
from attention_platform.course import variants
from attention_platform.deadlines import late_policy

FEEDBACK_CHOICES = {
    "off": "off: nothing on submit; feedback comes when the course staff release it",
    "checks": "checks: each hidden check's title, passed or not, and the points",
    "full": "full: the feedback page the TAs would release",
}
COUNTS_CHOICES = {
    "last": "last: the newest graded attempt",
    "best": "best: the highest-scoring graded attempt (the newest among equals)",
    "collected": "collected: the submission the TAs' collect picks",
}
assert set(FEEDBACK_CHOICES) == set(FEEDBACK_LEVELS) and set(COUNTS_CHOICES) == set(COUNTS)


def from_form(values: dict[str, str]) -> dict:
    """The form's text fields as the policy's values: numbers where they read as numbers, an empty
    attempts field as no limit; anything else stays text, for parse() to name what is wrong."""
    raw = {}
    for key in POLICY_KEYS:
        text = values.get(key, "").strip()
        if key in ("feedback", "counts"):
            raw[key] = text
        elif key == "attempts" and not text:
            raw[key] = None
        else:
            raw[key] = _number(text)
    return raw


def _number(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def _text(value) -> str:
    return "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def source(course_root: str, assignment: str) -> str:
    """Where the assignment's policy comes from, in words for the page."""
    try:
        saved = policy_store.read(course_root)
    except PolicyError:
        saved = {}
    if assignment in saved:
        return "Set in this form, which takes precedence over the course's nbgrader_config.py."
    return ("From the course's nbgrader_config.py, or the deployment's ATTENTION_FEEDBACK_ON_SUBMIT; "
            "off when neither names the assignment.")


def variants_state(course_root: str, assignment: str) -> str:
    """The assignment's variants, in words for the page."""
    if not variants.offered(assignment):
        return "Not offered: no part of this assignment has numbers that vary per student."
    try:
        on = variants.is_on(course_root, assignment)
    except variants.VariantsError as exc:
        return f"Unknown: {exc}"
    return ("On: each student fetches numbers of their own, and is graded on them." if on
            else "Off: every student works with the release's numbers.")


def variants_action(course_root: str, assignment: str, action: str, confirmed: bool) -> str:
    """Do what the form's variants button asks; the sentence saying what was done. VariantsError or
    OSError when nothing could be done."""
    from attention_platform.exchange.commands import submissions_with_variants, write_copies

    if action == "variants-regenerate":
        submitted = submissions_with_variants(Path(course_root))
        if submitted and not confirmed:
            raise variants.VariantsError(
                f"{len(submitted)} submissions of assignments with variants exist. A new key changes every "
                "student's numbers, and their hidden checks would judge numbers they never saw: tick the box to "
                "make a new key anyway")
        variants.regenerate(course_root)
        for name in variants.read_switches(course_root):
            if variants.is_on(course_root, name):
                write_copies(Path(course_root), name)
        return "A new key: every student's numbers have changed, and their copies were written again."
    variants.switch(course_root, assignment, action == "variants-on")
    written = write_copies(Path(course_root), assignment)
    copies = ("each student's copy is written when the assignment is released" if written is None
              else f"own copies written for {written} students")
    return f"Variants {'on' if action == 'variants-on' else 'off'}: {copies}."


def _handler():
    from nbgrader.server_extensions.formgrader.base import BaseHandler

    from attention_platform.formgrader import late_policy_form
    from attention_platform.formgrader.feedback_on_submit import policies
    from attention_platform.formgrader.formgrader_gate import INSTRUCTOR, role_of

    class PolicyFormHandler(BaseHandler):
        def _show(self, assignment: str, *, values: dict | None = None, error: str = "", saved: str = "",
                  late_values: dict | None = None, late_error: str = ""):
            found = policies(self.coursedir.root, [assignment])[assignment]
            late, late_unusable = late_policy_form.in_force(self.coursedir.root, assignment)
            current = found if isinstance(found, Policy) else Policy(assignment)
            if values is None:
                values = {key: _text(getattr(current, key)) for key in POLICY_KEYS}
            self.write(self.render(
                "attention_policy.tpl", base_url=self.base_url, assignment=assignment, values=values,
                in_force=found.describe() if isinstance(found, Policy) else "",
                not_in_force=found if isinstance(found, str) else "",
                source=source(self.coursedir.root, assignment), error=error, saved=saved,
                variants_state=variants_state(self.coursedir.root, assignment),
                variants_offered=variants.offered(assignment),
                editable=role_of(self.current_user) == INSTRUCTOR, xsrf=self.xsrf_token.decode(),
                feedback_choices=FEEDBACK_CHOICES, counts_choices=COUNTS_CHOICES,
                late_in_force=late.describe() if late else "", late_not_in_force=late_unusable,
                late_values=late_values or late_policy_form.form_values(late), late_error=late_error,
                late_kind_choices=late_policy_form.KIND_CHOICES, late_per_choices=late_policy_form.PER_CHOICES))

        def _known(self, assignment: str) -> None:
            if assignment not in {a.name for a in self.gradebook.assignments}:
                raise web.HTTPError(404, f"the gradebook has no assignment {assignment!r}")

        @web.authenticated
        def get(self, assignment):
            self._known(assignment)
            saved = {"saved": "Saved. The grader applies it to the next submission, within a second.",
                     "reset": "The assignment takes its policy from the course configuration again.",
                     "late-saved": "Late policy saved. Every student's Lab shows it.",
                     "late-reset": "The assignment has no late policy: nbgrader's behaviour (late submissions are "
                                   "marked late)."}
            self._show(assignment, saved=saved.get(self.get_query_argument("done", ""), ""))

        @web.authenticated
        async def post(self, assignment):
            self._known(assignment)
            action = self.get_body_argument("action", "save")
            if action.startswith("variants-"):
                confirmed = self.get_body_argument("confirm", "") == "yes"
                try:  # every student's own copy is written: off the server's only thread
                    done = await asyncio.get_running_loop().run_in_executor(
                        None, variants_action, self.coursedir.root, assignment, action, confirmed)
                except (variants.VariantsError, OSError) as exc:
                    self.set_status(400)
                    self._show(assignment, error=str(exc))
                    return
                self._show(assignment, saved=done)
                return
            if action in late_policy_form.ACTIONS:
                late_values = {key: self.get_body_argument(key, "")[:100] for key in late_policy.KEYS}
                try:  # every student's deadline file is written: off the server's only thread
                    done = await asyncio.get_running_loop().run_in_executor(
                        None, late_policy_form.apply, self.coursedir.root, assignment, action, late_values,
                        dt.datetime.now(dt.timezone.utc))
                except late_policy.LatePolicyError as exc:
                    self.set_status(400)
                    self._show(assignment, late_values=late_values, late_error=str(exc))
                    return
                self.redirect(f"{self.base_url}/formgrader/policy/{assignment}?done={done}", status=303)
                return
            values = {key: self.get_body_argument(key, "")[:100] for key in POLICY_KEYS}
            try:
                if action == "reset":
                    policy_store.forget(self.coursedir.root, assignment)
                    done = "reset"
                else:
                    policy_store.save(self.coursedir.root, assignment, from_form(values))
                    done = "saved"
            except PolicyError as exc:
                self.set_status(400)
                self._show(assignment, values=values, error=str(exc))
                return
            self.redirect(f"{self.base_url}/formgrader/policy/{assignment}?done={done}", status=303)

    return PolicyFormHandler


def handlers(base_url: str) -> list:
    """The routes this module serves (each also in formgrader_gate.ROUTES)."""
    from jupyter_server.utils import url_path_join as join

    from attention_platform.formgrader.formgrader_gate import _ID

    return [(join(base_url, rf"formgrader/policy/(?P<assignment>{_ID})/?"), _handler())]
