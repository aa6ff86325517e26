"""Progress bars of the long commands (autograde-batch, report, exports, feedback), from tqdm.

One look everywhere: a bar that redraws in place on a terminal, and a line every few seconds
in a log file or CI output, always on stderr so stdout keeps only the command's result.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TextIO, TypeVar

from tqdm import tqdm

T = TypeVar("T")


def progress_bar(total: int, label: str, *, stream: TextIO | None = None, enabled: bool = True,
                 unit: str = "student") -> tqdm:
    """A bar of ``total`` steps; ``.update()`` after each, ``.set_postfix_str(who)`` to name it,
    ``.close()`` at the end (or use it as a context manager)."""
    stream = stream or sys.stderr
    tty = hasattr(stream, "isatty") and stream.isatty()
    return tqdm(total=total, desc=label, file=stream, disable=not enabled, dynamic_ncols=tty,
                mininterval=0.2 if tty else 5.0, ascii=not tty, leave=True, unit=f" {unit}")


def track(items: Iterable[T], total: int, label: str, *, stream: TextIO | None = None) -> Iterator[T]:
    """Iterate over ``items`` with a progress bar."""
    with progress_bar(total, label, stream=stream) as bar:
        for item in items:
            yield item
            bar.update()
