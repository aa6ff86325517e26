"""What the formgrader's progress line reads while a submission is autograded
(attention_platform/grading/progress.py, reported by SandboxedExecute, read by the progress API)."""

from attention_platform.grading import progress


def test_progress_follows_the_notebooks_and_ends_with_the_submission():
    assert progress.current("a1", "s1") is None
    progress.started("a1", "s1", "self_attention", total=6)
    now = progress.current("a1", "s1")
    assert (now["notebook"], now["done"], now["total"]) == ("self_attention", 0, 6) and now["seconds"] >= 0
    progress.finished("a1", "s1")
    progress.started("a1", "s1", "02_by_hand", total=6)
    assert (progress.current("a1", "s1")["notebook"], progress.current("a1", "s1")["done"]) == ("02_by_hand", 1)
    assert progress.current("a1", "s2") is None  # another student's autograde is its own
    progress.clear("a1", "s1")
    assert progress.current("a1", "s1") is None


def test_a_total_never_reads_less_than_what_is_done():
    progress.started("a2", "s1", "one", total=1)
    progress.finished("a2", "s1")
    progress.started("a2", "s1", "two", total=1)  # a notebook the folder count missed
    assert progress.current("a2", "s1")["total"] == 2
    progress.clear("a2", "s1")
