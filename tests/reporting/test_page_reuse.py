"""Feedback pages kept for reuse (attention_platform/reporting/page_reuse.py): the folder keeps the pages
used last and loses nothing when it cannot be used; a page's making has the same digest in every process
and a different one when a setting that changes the page changes. That a reused page is the bytes of a
fresh one, and a changed grade makes it again, is tests/reporting/test_feedback_page.py's."""

from __future__ import annotations

import os

from attention_platform.reporting import page_reuse
from attention_platform.reporting.safe_html import FEEDBACK_TEMPLATES, FeedbackHTMLExporter, SanitizeOutputsAndRawCells


def test_the_folder_keeps_the_pages_used_last(tmp_path):
    store = page_reuse.PageStore(tmp_path / "pages", kept=3)
    for n, key in enumerate("abc"):
        store.put(key, f"<p>page {key}</p>")
        os.utime(store._path(key), ns=(n * 10**9, n * 10**9))  # made one second apart
    assert store.get("a") == "<p>page a</p>"  # used now: the newest
    store.put("d", "<p>page d</p>")
    assert sorted(p.name for p in (tmp_path / "pages").iterdir()) == ["a.html.gz", "c.html.gz", "d.html.gz"]
    assert store.get("b") is None
    assert oct((tmp_path / "pages").stat().st_mode & 0o777) == "0o700"


def test_a_folder_that_cannot_be_used_reuses_nothing_and_loses_nothing(tmp_path):
    (tmp_path / "not-a-folder").write_text("")
    store = page_reuse.PageStore(tmp_path / "not-a-folder", kept=3)
    store.put("a", "<p>page</p>")  # no error: the page was made and is written where nbgrader writes it
    assert store.get("a") is None
    broken = page_reuse.PageStore(tmp_path / "pages", kept=3)
    broken.put("a", "<p>page</p>")
    broken._path("a").write_bytes(b"not gzip")
    assert broken.get("a") is None


def _exporter(**settings):
    exporter = FeedbackHTMLExporter(template_name="attention_feedback", extra_template_basedirs=[FEEDBACK_TEMPLATES],
                                    **settings)
    exporter.register_preprocessor(SanitizeOutputsAndRawCells(parent=exporter), enabled=True)
    return exporter


def test_a_pages_making_reads_the_same_in_every_process_and_changes_with_what_changes_the_page():
    first, second = _exporter(), _exporter()
    sanitizer = next(p for p in second._preprocessors if isinstance(p, SanitizeOutputsAndRawCells))
    # nbconvert keeps its allow-lists in a set's order, which differs from one process to the next
    sanitizer.tags = list(reversed(sanitizer.tags))
    sanitizer.styles = list(reversed(sanitizer.styles))
    assert page_reuse.making(first) == page_reuse.making(second)
    assert page_reuse.making(_exporter(reused_pages_kept=7)) == page_reuse.making(first)  # where pages are kept
    assert page_reuse.making(_exporter(content_security_policy="default-src 'self'")) != page_reuse.making(first)
    sanitizer.tags = sanitizer.tags[1:]  # one tag fewer kept
    assert page_reuse.making(second) != page_reuse.making(first)


def test_a_page_of_no_graded_notebook_has_no_key():
    import nbformat

    nb = nbformat.v4.new_notebook()
    assert page_reuse.page_key(_exporter(), nb, None) is None
    assert page_reuse.page_key(_exporter(), nb, {"metadata": {"path": "/tmp"}}) is None
