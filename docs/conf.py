"""Sphinx configuration of the course platform's documentation (MyST Markdown pages).

`make docs` builds it into build/docs/; `tests/test_docs.py` builds it with warnings as errors."""

project = "Self-attention, autograded"
author = "The course platform's maintainers"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
html_theme = "alabaster"
html_theme_options = {"description": "An nbgrader + JupyterHub course platform with hidden checks", "fixed_sidebar": True}
html_static_path = []
# Screenshots are written by the browser tests from a live hub; a fresh clone has none until they run.
suppress_warnings = []
