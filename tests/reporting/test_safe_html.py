"""The sanitiser every student page goes through (attention_platform/reporting/safe_html.py): what
it drops, and that the cells every submission shares (the instructor's markdown and code, the same
in each of a class's feedback pages) are sanitised and highlighted once, not once a page (ours and
nbconvert's own sanitiser alike)."""

from __future__ import annotations

import copy
import re
import uuid

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from attention_platform.reporting import safe_html


class CountingCleaner:
    """bleach's cleaner of the module, counting the documents it parses."""

    def __init__(self, real):
        self.real, self.cleaned = real, 0

    def clean(self, html):
        self.cleaned += 1
        return self.real.clean(html)


def recorded_calls(monkeypatch, owner, name: str) -> list[tuple]:
    """The arguments of every call of ``owner.name`` from now on (which still does what it does)."""
    real, calls = getattr(owner, name), []

    def recording(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, recording)
    return calls


def _notebook(markdown: list[str]):
    return new_notebook(cells=[new_markdown_cell(text) for text in markdown])


def _page(nb) -> str:
    html, _ = safe_html.SafeHTMLExporter().from_notebook_node(nbformat.from_dict(copy.deepcopy(nb)))
    return html


def test_markdown_shared_by_every_page_is_sanitised_once_and_reads_the_same(monkeypatch):
    cleaner = CountingCleaner(safe_html._cleaner)
    monkeypatch.setattr(safe_html, "_cleaner", cleaner)
    marker = uuid.uuid4().hex  # never rendered before in this process
    shared = [f"# Part {marker}\n\nCompute the **scores** {i}.\n\n| a | b |\n|---|---|\n| 1 | 2 |" for i in range(12)]
    nb = _notebook(shared)
    first = _page(nb)
    cleaned_once = cleaner.cleaned
    assert cleaned_once >= len(shared)
    second = _page(nb)
    assert second == first  # byte for byte
    assert cleaner.cleaned == cleaned_once, "the same rendered markdown was sanitised again"


def test_markdown_shared_by_every_page_is_rendered_once_unless_it_has_attachments(monkeypatch):
    from nbconvert.exporters.html import HTMLExporter

    calls = recorded_calls(monkeypatch, HTMLExporter, "markdown2html")  # (exporter, context, source)
    marker = uuid.uuid4().hex
    shared = [f"## Step {i} {marker}\n\nDivide the scores by $\\sqrt{{D}}$." for i in range(6)]
    picture = new_markdown_cell(f"![w](attachment:w.png) {marker}",
                                attachments={"w.png": {"image/png": "iVBORw0KGgo="}})
    nb = new_notebook(cells=[new_markdown_cell(text) for text in shared] + [picture])
    first = _page(nb)
    assert sum(marker in source for _, _, source in calls) == 7
    calls.clear()
    assert _page(nb) == first  # byte for byte
    assert [source for _, _, source in calls if marker in source] == [picture.source]  # attachments: made again


def _page_in(folder, nb, **settings) -> str:
    html, _ = safe_html.SafeHTMLExporter(**settings).from_notebook_node(
        nbformat.from_dict(copy.deepcopy(nb)), resources={"metadata": {"path": str(folder)}})
    return html


def test_markdown_is_rendered_once_whatever_folder_its_page_is_made_in(monkeypatch, tmp_path):
    from nbconvert.exporters.html import HTMLExporter

    calls = recorded_calls(monkeypatch, HTMLExporter, "markdown2html")
    marker = uuid.uuid4().hex
    nb = _notebook([f"The weights, drawn: ![weights](weights.png) {marker}"])
    # each attempt's pages are made in its own folder: the folder names no file the page reads
    pages = [_page_in(tmp_path / attempt, nb) for attempt in ("1", "2", "3")]
    assert pages[0] == pages[1] == pages[2]
    assert sum(marker in source for _, _, source in calls) == 1


def test_with_images_embedded_each_folders_own_picture_is_read(tmp_path):
    marker = uuid.uuid4().hex
    nb = _notebook([f"![weights](weights.png) {marker}"])
    for attempt, pixel in (("1", b"\x89PNG first"), ("2", b"\x89PNG second")):
        (tmp_path / attempt).mkdir()
        (tmp_path / attempt / "weights.png").write_bytes(pixel)
    first, second = (_page_in(tmp_path / attempt, nb, embed_images=True) for attempt in ("1", "2"))
    assert "data:image/png;base64," in first and first != second


def test_code_shared_by_every_page_is_highlighted_once_and_reads_the_same(monkeypatch):
    import nbconvert.filters.highlight as highlight

    highlighted = recorded_calls(monkeypatch, highlight, "_pygments_highlight")  # (source, ...)
    marker = uuid.uuid4().hex
    nb = new_notebook(cells=[new_code_cell(f"scores = q @ k.T  # {marker} {i}") for i in range(12)],
                      metadata={"language_info": {"name": "python", "pygments_lexer": "ipython3"}})
    first = _page(nb)
    assert len(highlighted) >= 12
    highlighted.clear()
    assert _page(nb) == first  # byte for byte
    assert highlighted == [], "the same code was highlighted again"
    plain = highlight.Highlight2HTML(pygments_lexer="ipython3")
    for source in (f"x = 1  # {marker}", "%%bash\necho hi", ""):
        for metadata in (None, {"magics_language": "bash"}):
            assert safe_html.RememberedHighlight(plain)(source, None, metadata) == plain(source, None, metadata)


def test_code_shared_by_every_page_goes_through_nbconverts_own_sanitiser_once_and_reads_the_same(monkeypatch):
    # nbconvert's templates pass each highlighted code cell through its own clean_html (bleach.clean)
    import bleach
    from nbconvert.filters.strings import clean_html as nbconvert_clean

    cleaned = recorded_calls(monkeypatch, bleach, "clean")  # (text, ...)
    marker = uuid.uuid4().hex
    nb = new_notebook(cells=[new_code_cell(f"weights = scores.softmax(-1)  # {marker} {i}") for i in range(12)],
                      metadata={"language_info": {"name": "python", "pygments_lexer": "ipython3"}})
    first = _page(nb)
    assert sum(marker in call[0] for call in cleaned) >= 12
    cleaned.clear()
    assert _page(nb) == first  # byte for byte
    assert not any(marker in call[0] for call in cleaned), "the same code went through bleach again"
    for html in (f"<div class='highlight'><pre>x = 1  # {marker}</pre></div>", "<script>alert(1)</script><b>b</b>",
                 "<img src=x onerror=alert(1)>", b"<a href='javascript:x'>a</a>", "x" * (safe_html.REMEMBERED_CHARS + 1)):
        assert safe_html.remembered_nbconvert_clean(html) == nbconvert_clean(html)
        assert safe_html.remembered_nbconvert_clean(html) == nbconvert_clean(html)  # remembered, the same


def test_what_runs_code_is_dropped_also_when_remembered():
    hostile = f"<script>alert('{uuid.uuid4().hex}')</script><img src=x onerror=alert(1)><a href='javascript:x'>a</a>"
    nb = _notebook([hostile])
    for _ in range(2):
        html = _page(nb)
        assert "<script>alert" not in html and "onerror" not in html and "javascript:" not in html


def _feedback_page(nb) -> str:
    exporter = safe_html.FeedbackHTMLExporter(template_name="attention_feedback",
                                              extra_template_basedirs=[safe_html.FEEDBACK_TEMPLATES])
    html, _ = exporter.from_notebook_node(nbformat.from_dict(copy.deepcopy(nb)),
                                          resources={"nbgrader": {"notebook": "self_attention"}})
    return html


def test_an_exporter_made_after_the_first_compiles_no_template(monkeypatch):
    """nbgrader makes an exporter per generate_feedback (the page maker: one per attempt)."""
    from jinja2 import Environment

    compiled = []
    real = Environment._compile

    def counted(self, source, filename):
        compiled.append(filename)
        return real(self, source, filename)

    monkeypatch.setattr(Environment, "_compile", counted)
    nb = _notebook([f"# Part {uuid.uuid4().hex}"])
    first = _feedback_page(nb)
    compiled.clear()
    assert _feedback_page(nb) == first  # byte for byte
    assert compiled == [], f"templates compiled again: {compiled}"


class _Renamer:
    """A preprocessor that gives every cell a new id, or (``breaking``) a cell type no format allows."""

    def __init__(self, breaking: bool = False):
        self.breaking = breaking

    def __call__(self, nb, resources):
        for index, cell in enumerate(nb.cells):
            cell["id"] = f"cell-{index}"
            if self.breaking:
                cell["cell_type"] = "not-a-cell-type"
        return nb, resources


@pytest.mark.parametrize("case, preprocessors, expected", [
    ("three preprocessors", [_Renamer(), _Renamer(), _Renamer()], "one check"),
    ("the last one breaks the notebook", [_Renamer(), _Renamer(), _Renamer(breaking=True)], "refused"),
    ("the first one breaks it", [_Renamer(breaking=True), _Renamer(), _Renamer()], "refused"),
])
def test_a_page_checks_the_notebook_format_once_after_its_preprocessors(monkeypatch, case, preprocessors, expected):
    """nbconvert checks the notebook after each preprocessor; the feedback page once, after the last."""
    from nbconvert.exporters import exporter as nbconvert_exporter

    nb = nbformat.from_dict(copy.deepcopy(_notebook([f"# Part {uuid.uuid4().hex}"])))
    checks = []
    real = nbconvert_exporter.nbformat.validate

    def counted(nb, *args, **kwargs):
        checks.append(1)
        return real(nb, *args, **kwargs)

    monkeypatch.setattr(nbconvert_exporter.nbformat, "validate", counted)
    exporter = safe_html.FeedbackHTMLExporter(template_name="attention_feedback",
                                              extra_template_basedirs=[safe_html.FEEDBACK_TEMPLATES])
    for preprocessor in preprocessors:
        exporter.register_preprocessor(preprocessor, enabled=True)
    if expected == "refused":
        with pytest.raises(nbformat.ValidationError):
            exporter.from_notebook_node(nb, resources={"nbgrader": {"notebook": "self_attention"}})
    else:
        exporter.from_notebook_node(nb, resources={"nbgrader": {"notebook": "self_attention"}})
    assert len(checks) == 1, case


def _image(alt: str | None):
    metadata = {"image/png": {"alt": alt}} if alt is not None else {}
    return new_code_cell("plot()", outputs=[nbformat.v4.new_output(
        "display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}, metadata=metadata)])


def test_a_page_is_parsed_again_only_for_what_that_pass_changes(monkeypatch):
    """nbconvert's HTMLExporter parses every page again (BeautifulSoup) to give images without
    alternative text its placeholder; a feedback page whose images all have one skips that pass,
    one with an image without reads as nbconvert makes it."""
    import bs4

    parsed = []
    real = bs4.BeautifulSoup.__init__

    def counted(self, markup="", *args, **kwargs):
        parsed.append(len(markup))
        return real(self, markup, *args, **kwargs)

    monkeypatch.setattr(bs4.BeautifulSoup, "__init__", counted)
    described = new_notebook(cells=[new_markdown_cell(f"# {uuid.uuid4().hex}"), _image("Attention weights, 6 by 6")])
    html = _feedback_page(described)
    assert parsed == [], "a page whose images all have alternative text was parsed again"
    assert 'alt="Attention weights, 6 by 6"' in html and "Content-Security-Policy" in html
    undescribed = new_notebook(cells=[new_markdown_cell("![](data:image/png;base64,iVBORw0KGgo=)"), _image(None),
                                      new_markdown_cell('<img title=" alt=" src="data:image/png;base64,iVBORw0KGgo=">')])
    html = _feedback_page(undescribed)
    assert len(parsed) == 1
    images = re.findall(r"<img\b[^>]*>", html)
    assert len(images) == 3 and all(" alt=" in re.sub(r'title="[^"]*"', "", tag) for tag in images), images
    assert "No description has been provided for this image" in html


@pytest.mark.parametrize("template", ["attention_feedback", "lab", "classic"])
def test_a_page_that_needs_the_pass_reads_as_nbconverts_own(template):
    """Where the pass is made, the feedback exporter's steps (nbconvert 7's HTMLExporter's, mirrored in
    FeedbackHTMLExporter._rendered and _accessibility_pass) give nbconvert's bytes; Lab's template needs it
    for its focusable cells."""
    nb = new_notebook(cells=[new_markdown_cell(f"# {uuid.uuid4().hex}"), _image(None),
                             new_code_cell("x = 1", metadata={"tags": ["x"]})],
                      metadata={"language_info": {"name": "python", "pygments_lexer": "ipython3"}})
    settings = dict(template_name=template, extra_template_basedirs=[safe_html.FEEDBACK_TEMPLATES])
    resources = {"nbgrader": {"notebook": "self_attention"}}
    ours, _ = safe_html.FeedbackHTMLExporter(content_security_policy="", **settings).from_notebook_node(
        nbformat.from_dict(copy.deepcopy(nb)), resources=copy.deepcopy(resources))
    nbconverts, _ = safe_html.SafeHTMLExporter(**settings).from_notebook_node(
        nbformat.from_dict(copy.deepcopy(nb)), resources=copy.deepcopy(resources))
    assert ours == nbconverts
