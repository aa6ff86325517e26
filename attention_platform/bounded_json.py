"""JSON from someone else, parsed only once its shape is known to be small enough.

``json.loads`` builds every object it meets before anyone can look at the result: three bytes
``{},`` become a dict of 64 bytes (more as a ``NotebookNode``, more again once nbformat has
validated it), so a notebook of a few MB whose metadata holds a million empty objects costs a
process gigabytes. :func:`check_shape` counts, in one linear pass over the text and before
anything is built, what parsing it would build: containers (objects and arrays), values and
members, and the deepest nesting; :func:`loads` and :func:`reads_notebook` parse only text
within a :class:`Bounds`. What parsing then allocates is bounded by the bytes received plus a
fixed cost per counted item, whatever the sender chose.

The pass removes every string first (strings hold no structure), with one regular expression
that cannot fail part-way, so it stays linear for any input, valid JSON or not; the counts are
exact for valid JSON and, for text ``json.loads`` would reject part-way, never lower than what
it builds before it stops.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from itertools import accumulate

# A string, its escapes included; an unterminated one runs to the end of the text, so the pattern
# always matches where it starts (no retry from each later quote: linear time).
_STRINGS = {str: re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*\\?(?:"|\Z)', re.S),
            bytes: re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*\\?(?:"|\Z)', re.S)}
_NOT_BRACKETS = {str: re.compile(r"[^\[\]{}]+"), bytes: re.compile(rb"[^\[\]{}]+")}
_OPEN = {str: ("{", "["), bytes: (b"{", b"[")}
_COMMA = {str: ",", bytes: b","}
_COLON = {str: ":", bytes: b":"}
_NESTING = {ord("{"): 1, ord("["): 1, ord("}"): -1, ord("]"): -1}


class TooComplex(ValueError):
    """The text is over a bound; the message says which, in words for the person who sent it."""


@dataclass(frozen=True)
class Bounds:
    """What one text may make a parser build."""

    max_bytes: int  # characters of a str, bytes of bytes
    max_depth: int  # deepest nesting of objects and arrays
    max_containers: int  # objects and arrays
    max_items: int  # array elements and object members, all containers together


@dataclass(frozen=True)
class Shape:
    size: int
    depth: int
    containers: int
    items: int


# A notebook of this course is a few hundred containers and a few thousand items (outputs and
# images are strings: one item each, whatever their size). 24 MB is the most Validate takes.
NOTEBOOK = Bounds(max_bytes=24 << 20, max_depth=64, max_containers=50_000, max_items=500_000)


def shape(text: str | bytes, limit_containers: int | None = None) -> Shape:
    """Size, nesting depth, containers and items of ``text``, counted without building any of them.
    The depth is measured only when there are at most ``limit_containers`` containers (0 otherwise),
    so that its pass is bounded too."""
    kind = bytes if isinstance(text, (bytes, bytearray, memoryview)) else str
    if kind is bytes and not isinstance(text, bytes):
        text = bytes(text)
    skeleton = _STRINGS[kind].sub(kind(), text)  # at most as long as the text
    opening, array = _OPEN[kind]
    containers = skeleton.count(opening) + skeleton.count(array)
    # every item but a container's last is followed by a comma; a container's last is counted with it
    items = skeleton.count(_COMMA[kind]) + containers
    depth = 0
    if limit_containers is None or containers <= limit_containers:
        brackets = _NOT_BRACKETS[kind].sub(kind(), skeleton)
        if kind is str:
            brackets = brackets.encode("ascii")
        depth = max(accumulate(_NESTING[c] for c in brackets), default=0)
    return Shape(size=len(text), depth=depth, containers=containers, items=items)


def checker(bounds: Bounds, what: str):
    """``check_shape`` for one kind of text, as a frame reader takes it (``protocol.recv_frame``)."""
    return lambda text: check_shape(text, bounds, what)


def check_shape(text: str | bytes, bounds: Bounds, what: str = "the JSON text") -> Shape:
    """``text``'s shape if it is within ``bounds``; TooComplex naming the first bound it is over."""
    if len(text) > bounds.max_bytes:
        raise TooComplex(f"{what} is {_mb(len(text))}, more than the {_mb(bounds.max_bytes)} allowed")
    found = shape(text, bounds.max_containers)
    if found.containers > bounds.max_containers:
        raise TooComplex(f"{what} holds {found.containers:,} objects and lists, more than the "
                         f"{bounds.max_containers:,} allowed")
    if found.items > bounds.max_items:
        raise TooComplex(f"{what} holds {found.items:,} values, more than the {bounds.max_items:,} allowed")
    if found.depth > bounds.max_depth:
        raise TooComplex(f"{what} nests objects and lists {found.depth} deep, more than the "
                         f"{bounds.max_depth} allowed")
    return found


def loads(text: str | bytes, bounds: Bounds, what: str = "the JSON text"):
    """``json.loads(text)`` once ``text`` is within ``bounds`` (TooComplex otherwise)."""
    check_shape(text, bounds, what)
    return json.loads(text)


def reads_notebook(text: str | bytes, bounds: Bounds = NOTEBOOK, what: str = "the notebook"):
    """``nbformat.reads(text, as_version=4)`` once ``text`` is within ``bounds`` (TooComplex otherwise)."""
    import nbformat

    check_shape(text, bounds, what)
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return nbformat.reads(text, as_version=4)


def read_notebook(path, bounds: Bounds = NOTEBOOK, what: str = "the notebook"):
    """The notebook in the file ``path``, read no further than ``bounds.max_bytes`` (TooComplex beyond)."""
    with open(path, "rb") as fh:
        data = fh.read(bounds.max_bytes + 1)
    return reads_notebook(data, bounds, what)


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"
