"""Student content rendered as data: sanitised HTML wherever a notebook becomes a page.

A student controls their notebook's markdown, raw cells, outputs and attachments.
Whoever renders it (the formgrader for a TA, the feedback page for the student,
the report for the instructor) passes it through here:

* ``clean_html`` keeps the markup markdown produces (headings, lists, tables, code,
  links, images) and drops everything that can run or load code: scripts, event
  handlers, styles, iframes, forms, ``javascript:``/``data:`` links (``data:`` stays
  allowed for images only, which is how notebooks embed pictures).
* ``SafeHTMLExporter`` is nbconvert's HTML exporter with markdown sanitised *after*
  rendering (sanitising markdown source would mangle ``<`` and ``>`` in code) and
  outputs and raw cells sanitised before.

Pages that show student content also send a Content-Security-Policy that forbids
inline and foreign script, so a sanitiser bypass still runs nothing.
"""

from __future__ import annotations

import collections
import functools
import json
import re
import threading
from pathlib import Path

import bleach
from jinja2 import BytecodeCache, pass_context
from bleach.css_sanitizer import CSSSanitizer
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors.sanitize import SanitizeHTML
from traitlets import Bool, Integer, Unicode

TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span",
    "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul",
})
_CELL = ("align", "colspan", "rowspan")
_PLAIN = {
    "img": ("src", "alt", "title", "width", "height"),
    "td": _CELL, "th": _CELL,
    "code": ("class",), "pre": ("class",), "span": ("class",), "div": ("class",),
    "abbr": ("title",),
    **{f"h{n}": ("id",) for n in range(1, 7)},
}


def _link_attribute(tag: str, name: str, value: str) -> bool:
    """<a href> may not be a data: URL (a page in disguise); data: stays for <img src>."""
    if name == "href":
        return not value.strip().lower().startswith("data:")
    return name == "title"


ATTRIBUTES = {"a": _link_attribute, **{tag: list(names) for tag, names in _PLAIN.items()}}
PROTOCOLS = frozenset({"http", "https", "mailto", "data"})
_cleaner = bleach.Cleaner(tags=TAGS, attributes=ATTRIBUTES, protocols=PROTOCOLS, strip=True, strip_comments=True,
                          css_sanitizer=CSSSanitizer(allowed_css_properties=()))


# The same cell comes back in every page of a class (the instructor's markdown and code, a check's
# verdict): its sanitised or highlighted HTML is remembered, for this many cells of at most this many
# characters each.
REMEMBERED_CELLS = 2048
REMEMBERED_CHARS = 16_384


@functools.lru_cache(maxsize=REMEMBERED_CELLS)
def _clean_remembered(html: str) -> str:
    return _cleaner.clean(html)


def clean_html(html: str) -> str:
    """``html`` (rendered from student content) without anything that runs or loads code."""
    if len(html) <= REMEMBERED_CHARS:
        return _clean_remembered(html)
    return _cleaner.clean(html)


class Remembered:
    """The ``most`` values made last, by key (threads may share it)."""

    def __init__(self, most: int):
        self.most, self.values, self.lock = most, collections.OrderedDict(), threading.Lock()

    def get_or_make(self, key, make):
        with self.lock:
            if key in self.values:
                self.values.move_to_end(key)
                return self.values[key]
        value = make()
        with self.lock:
            self.values[key] = value
            if len(self.values) > self.most:
                self.values.popitem(last=False)
        return value


_REMEMBERED_MARKDOWN = Remembered(REMEMBERED_CELLS)


@functools.lru_cache(maxsize=REMEMBERED_CELLS)
def _nbconvert_clean_remembered(html: str) -> str:
    from nbconvert.filters.strings import clean_html as nbconvert_clean

    return nbconvert_clean(html)


def remembered_nbconvert_clean(element) -> str:
    """nbconvert's own ``clean_html`` filter (its templates pass every highlighted code cell through it),
    its result remembered per text: most of a class's code cells are the instructor's, the same on
    every page."""
    from nbconvert.filters.strings import clean_html as nbconvert_clean

    html = element.decode() if isinstance(element, bytes) else str(element)
    if len(html) <= REMEMBERED_CHARS:
        return _nbconvert_clean_remembered(html)
    return nbconvert_clean(html)


class SanitizeOutputsAndRawCells(SanitizeHTML):
    """nbconvert's SanitizeHTML for outputs and raw cells; markdown is left for the
    exporter, which sanitises it after rendering."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "markdown":
            return cell, resources
        if cell.cell_type == "raw":
            cell.source = clean_html(cell.source)
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)


@functools.lru_cache(maxsize=REMEMBERED_CELLS)
def _highlighted(pygments_lexer, formatter_options: str, source: str, language, magics_language) -> str:
    from nbconvert.filters.highlight import Highlight2HTML

    highlight = Highlight2HTML(pygments_lexer=pygments_lexer, extra_formatter_options=json.loads(formatter_options))
    return highlight(source, language, {"magics_language": magics_language} if magics_language else None)


class RememberedHighlight:
    """nbconvert's ``highlight_code`` filter (``Highlight2HTML``), its HTML remembered per source and
    language: what it reads of a cell's metadata is only ``magics_language``."""

    def __init__(self, highlight):
        self.highlight = highlight

    def __call__(self, source, language=None, metadata=None):
        magics_language = metadata.get("magics_language") if metadata else None
        try:
            options = json.dumps(self.highlight.extra_formatter_options, sort_keys=True)
        except (TypeError, ValueError):
            options = None
        if options is None or len(source) > REMEMBERED_CHARS or not isinstance(magics_language, (str, type(None))):
            return self.highlight(source, language, metadata)
        return _highlighted(self.highlight.pygments_lexer, options, source, language, magics_language)


class CompiledTemplates(BytecodeCache):
    """Jinja's compiled templates, kept for the life of the process: every exporter made after the
    first (nbgrader makes one per ``generate_feedback``, so one per graded attempt in the
    feedback-on-submit grader's page maker) loads them instead of compiling them again. Jinja keys
    each by the template's name and file and checks it against the template's source."""

    def __init__(self):
        self.compiled: dict[str, bytes] = {}

    def load_bytecode(self, bucket):
        if bucket.key in self.compiled:
            bucket.bytecode_from_string(self.compiled[bucket.key])

    def dump_bytecode(self, bucket):
        self.compiled[bucket.key] = bucket.bytecode_to_string()

    def clear(self):
        self.compiled.clear()


COMPILED_TEMPLATES = CompiledTemplates()


class SafeHTMLExporter(HTMLExporter):
    """HTML export of a notebook written by a student: markdown, raw cells and outputs sanitised."""

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = COMPILED_TEMPLATES
        return environment

    def register_filter(self, name, jinja_filter):
        from nbconvert.filters.highlight import Highlight2HTML

        if name == "highlight_code" and type(jinja_filter) is Highlight2HTML:
            jinja_filter = RememberedHighlight(jinja_filter)
        return super().register_filter(name, jinja_filter)

    def default_filters(self):
        from nbconvert.filters.strings import clean_html as nbconvert_clean

        for name, jinja_filter in super().default_filters():
            yield name, remembered_nbconvert_clean if jinja_filter is nbconvert_clean else jinja_filter

    @pass_context
    def markdown2html(self, context, source):
        """nbconvert's markdown filter, sanitised; remembered per text and rendering settings for a cell
        with no attachments (most of a page's markdown is the instructor's, the same on every page)."""
        def made():
            return clean_html(super(SafeHTMLExporter, self).markdown2html(context, source))

        cell = context.get("cell", {})
        if self.embed_images or cell.get("attachments") or len(source) > REMEMBERED_CHARS:
            return made()  # what it reads besides its text (its attachments, image files) may change
        # The page's folder is not in the key: nbconvert reads it only to embed images, so every
        # attempt's pages, each made in its own folder, share the instructor's markdown.
        key = (source, self.anchor_link_text, self.exclude_anchor_links,
               json.dumps(self.lexer_options, sort_keys=True, default=repr))
        return _REMEMBERED_MARKDOWN.get_or_make(key, made)

    def _init_preprocessors(self):
        super()._init_preprocessors()
        self.register_preprocessor(SanitizeOutputsAndRawCells(parent=self), enabled=True)


# Our nbconvert templates (the feedback page's: attention_feedback/).
FEEDBACK_TEMPLATES = str(Path(__file__).resolve().parent / "templates")

# A feedback page is a static file the student opens wherever they like: it needs no script,
# so it allows none, whatever the page holds; styles and embedded pictures only.
FEEDBACK_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; base-uri 'none'; form-action 'none'"


# What nbconvert's HTMLExporter parses a whole page again for (with BeautifulSoup, the larger part of
# a feedback page's making): an image without alternative text, or a Lab cell or output to make focusable.
_IMAGE_TAG = re.compile(r"""<img\b((?:[^>"']|"[^"]*"|'[^']*')*)>""", re.IGNORECASE)
_ATTRIBUTE = re.compile(r"""([^\s"'=<>/]+)(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+))?""")
_FOCUSABLE = ("jp-Cell-inputWrapper", "jp-OutputArea-output")


def needs_accessibility_pass(html: str) -> bool:
    """Whether HTMLExporter's pass over ``html`` (alternative text on every image, focusable Lab
    cells and outputs) could change anything in it; errs towards yes (an ``<img`` or a Lab class
    name anywhere, in a style or a comment too, counts)."""
    if any(name in html for name in _FOCUSABLE):
        return True
    return any("alt" not in {name.lower() for name in _ATTRIBUTE.findall(attributes)}
               for attributes in _IMAGE_TAG.findall(html))


class FeedbackHTMLExporter(SafeHTMLExporter):
    """The feedback page: sanitised like every student page, and carrying its own
    Content-Security-Policy (``<meta http-equiv>``) that forbids every script. A page whose images
    all have alternative text is not parsed a second time (see :func:`needs_accessibility_pass`)."""

    content_security_policy = Unicode(
        FEEDBACK_POLICY, help="Content-Security-Policy written into the page's <head>; empty for none.",
    ).tag(config=True)
    reused_pages_folder = Unicode(
        "", help="Folder of the pages made, kept for reuse by whoever makes the same page again (feedback on "
                 "submit and the TA's generate_feedback; attention_platform/reporting/page_reuse.py); empty: none.",
    ).tag(config=True)
    reused_pages_kept = Integer(
        3000, help="Pages the reused_pages_folder keeps (those used last), about 60 KB each.",
    ).tag(config=True)
    # The notebook is checked against its format once, after the last preprocessor. nbconvert's default
    # checks the whole notebook again after each preprocessor, for every page; the answer is the same.
    optimistic_validation = Bool(
        True, help="Check the notebook against its format only after the last preprocessor (nbconvert's "
                   "Exporter.optimistic_validation); False checks it after each one, naming the one that broke it.",
    ).tag(config=True)

    def _rendered(self, nb, resources, **kw):
        """HTMLExporter's ``from_notebook_node`` up to its BeautifulSoup pass (nbconvert 7's filters
        and resources, then the template); the pass follows only where it changes something."""
        from nbconvert.exporters.templateexporter import TemplateExporter
        from nbconvert.filters.highlight import Highlight2HTML
        from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        self.register_filter("highlight_code",
                             self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self)))
        resources = self._init_resources(resources)
        self.register_filter("filter_data_type",
                             WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self, resources=resources))
        return TemplateExporter.from_notebook_node(self, nb, resources, **kw)

    def _accessibility_pass(self, html: str) -> str:
        """HTMLExporter's BeautifulSoup pass, as nbconvert 7 makes it."""
        from bs4 import BeautifulSoup

        soup = BeautifulSoup(html, features="html.parser")
        missing_alt = 0
        for elem in soup.select("img:not([alt])"):
            elem.attrs["alt"] = "No description has been provided for this image"
            missing_alt += 1
        if missing_alt:
            self.log.warning("Alternative text is missing on %s image(s).", missing_alt)
        for elem in soup.select(".jp-Notebook div.jp-Cell-inputWrapper"):
            elem.attrs["tabindex"] = "0"
        for elem in soup.select(".jp-Notebook div.jp-OutputArea-output"):
            elem.attrs["tabindex"] = "0"
        return str(soup)

    def from_notebook_node(self, nb, resources=None, **kw):
        from attention_platform.reporting import page_reuse

        store = page_reuse.PageStore(self.reused_pages_folder, self.reused_pages_kept) if self.reused_pages_folder else None
        key = page_reuse.page_key(self, nb, resources) if store is not None else None
        if key is not None and (page := store.get(key)) is not None:
            return page, self._init_resources(resources)
        output, resources = self._rendered(nb, resources, **kw)
        if needs_accessibility_pass(output):
            output = self._accessibility_pass(output)
        if self.content_security_policy:
            meta = f'<meta http-equiv="Content-Security-Policy" content="{self.content_security_policy}">'
            output = output.replace("<head>", "<head>\n" + meta, 1) if "<head>" in output else meta + output
        # kept if the gradebook did not change while the page was made (a TA grading meanwhile), and
        # if it needs no file beside it
        if key is not None and not resources.get("outputs") and page_reuse.page_key(self, nb, resources) == key:
            store.put(key, output)
        return output, resources
