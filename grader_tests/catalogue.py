"""What an assignment grades, as types: every assignment's ``catalogue`` defines its items with them.

Each assignment's ``grader_tests/<assignment>/catalogue.py`` lists its ``PARTS`` (one per notebook, in
the order students work through them) built from these types; ``registry`` binds every check to its
probe and judge. Everything a student or a teacher reads about a graded item comes from there: the check
cells' grade ids, points and titles (``python -m attention_platform.course.graded_cells`` writes them),
each notebook's table of what is graded, ``✓ Passed: <title>``, the misconception labels of the
report and the exports.

Pure data, never sent into a sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass

GRADE_ID_PREFIX = "check_"


@dataclass(frozen=True)
class HiddenCheck:
    """One hidden check: an autograded test cell that runs ``grade("<id>", globals())``."""

    id: str
    notebook: str  # nbgrader notebook id: the file name without .ipynb
    title: str  # a whole sentence, shown as "✓ Passed: <title>" and in the notebook's table
    points: int
    misconception: str  # the idea a failure points to, as the class report labels it
    # Public: Validate runs it too, before the student submits, and shows its title and verdict
    # (the probe and judge are the hidden check's own; the rest of the checks stay hidden until submit).
    public: bool = False

    @property
    def grade_id(self) -> str:
        return GRADE_ID_PREFIX + self.id


@dataclass(frozen=True)
class WrittenAnswer:
    """A written answer a TA grades: an nbgrader manual answer cell (and its rubric cell)."""

    grade_id: str
    notebook: str
    question: str  # how the notebook's table names it
    points: int


@dataclass(frozen=True)
class Part:
    """One notebook of the assignment; ``graded`` lists its graded items in the order its table shows them."""

    notebook: str
    number: int
    summary: str  # what the part is about, for the assignment's table of parts
    graded: tuple  # HiddenCheck and WrittenAnswer, in table order

    @property
    def file(self) -> str:
        return self.notebook + ".ipynb"

    @property
    def checks(self) -> list[HiddenCheck]:
        return [item for item in self.graded if isinstance(item, HiddenCheck)]

    @property
    def written(self) -> list[WrittenAnswer]:
        return [item for item in self.graded if isinstance(item, WrittenAnswer)]

    @property
    def auto_points(self) -> int:
        return sum(check.points for check in self.checks)

    @property
    def ta_points(self) -> int:
        return sum(answer.points for answer in self.written)

    @property
    def points(self) -> int:
        return self.auto_points + self.ta_points
