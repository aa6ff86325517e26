"""What may be said about a step of student code that failed in a sandbox: a reason of a fixed form.

Trusted: runs in the grader's process, never in a sandbox. The student's notebook runs in the same
interpreter as the probes and can hook how they are loaded, so every string of a reply, and every
error the sandbox reports, is the student's to choose -- the probes' own source included. No such
text reaches a person. ``screened`` replaces each error of a reply (``"<key>.error"``) by a reason
before any judge reads it; the grader does the same with the errors a sandbox reports itself. A
reason is one of:

* the name of the exception, if it is a builtin or torch exception (``"ValueError"``), or
  "an exception of its own type" -- never its message, which only the student's notebook shows;
* the probe's own words (``probing`` and each assignment's ``probes``: a definition or class missing, a
  value of the wrong kind), rebuilt here from their template with every field checked against a
  fixed set (names the probes read, classes, projections, type names, a layer's signature);
* a few exact error texts of torch that a judge names a misconception by.
"""

from __future__ import annotations

import builtins
import re
import string

import torch

from . import probing
from .discovery import probe_modules

OWN_TYPE = "an exception of its own type"
OWN_VALUE_TYPE = "value of its own type"
READ_IN_NOTEBOOK = "call it in your own notebook to read the whole message"

_BUILTIN_TYPES = [value for value in vars(builtins).values() if isinstance(value, type)]
EXCEPTION_NAMES = frozenset(
    {type_.__name__ for type_ in _BUILTIN_TYPES if issubclass(type_, BaseException)}
    | {type_.__name__ for type_ in (torch.linalg.LinAlgError, torch.cuda.OutOfMemoryError)}
)
VALUE_TYPE_NAMES = frozenset(
    {type_.__name__ for type_ in _BUILTIN_TYPES if not issubclass(type_, BaseException)}
    | {"NoneType", "function", "method", "builtin_function_or_method", "generator", "module", "ndarray", "Tensor",
       "Parameter", "Module", "Linear", "Sequential", "float16", "float32", "float64", "int32", "int64", "bool_",
       "dict_keys", "dict_values", "dict_items", "map", "zip", "Series", "DataFrame"}
)
_PROBES = probe_modules()
# What every assignment's probes declare their own words may name (``probing.read_name``'s names, the
# classes they build, the projections whose parameters they load).
DEFINED_NAMES = frozenset().union(*(getattr(m, "DEFINED_NAMES", ()) for m in _PROBES))
CLASS_NAMES = frozenset().union(*(getattr(m, "CLASS_NAMES", ()) for m in _PROBES))
PARAMETER_OWNERS = frozenset().union(*(getattr(m, "PARAMETER_OWNERS", ()) for m in _PROBES))
SIGNATURE = re.compile(rf"(?:{'|'.join(sorted(CLASS_NAMES))})\(\d{{1,6}}(?:, \d{{1,6}})?(?:, causal=(?:True|False))?\)")
PARAMETER = re.compile(rf"(?:{'|'.join(sorted(PARAMETER_OWNERS))})\.(?:weight|bias)")
# Error texts of torch a judge reads a misconception from (describe_exception's form).
KNOWN_TEXTS = frozenset({
    "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn",
})

# What each field of the probes' words may hold: (is it acceptable, what stands in for it otherwise).
_FIELDS = {
    "name": (DEFINED_NAMES.__contains__, None),
    "cls": (CLASS_NAMES.__contains__, None),
    "owner": (PARAMETER_OWNERS.__contains__, None),
    "param": (lambda text: PARAMETER.fullmatch(text) is not None, None),
    "signature": (lambda text: SIGNATURE.fullmatch(text) is not None, None),
    "type": (VALUE_TYPE_NAMES.__contains__, OWN_VALUE_TYPE),
    "exception": (EXCEPTION_NAMES.__contains__, OWN_TYPE),
}
PROBE_WORDS = (probing.MISSING, probing.NO_CLASS, probing.NOT_A_TENSOR, probing.CONSTRUCTOR_RAISED, probing.WRONG_SHAPE,
               *(words for m in _PROBES for words in getattr(m, "PROBE_WORDS", ())))


def _pattern(template: str) -> re.Pattern:
    parts = []
    for literal, field, _, _ in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if field is not None:
            parts.append(f"(?P<{field}>[^\\n]{{1,120}}?)")
    return re.compile("".join(parts))


_WORDS = [(_pattern(template), template) for template in PROBE_WORDS]


def _probe_words(text: str) -> str | None:
    """``text`` rebuilt from the probe template it matches, every field checked; None if none matches."""
    for pattern, template in _WORDS:
        match = pattern.fullmatch(text)
        if match is None:
            continue
        fields = {}
        for field, value in match.groupdict().items():
            acceptable, stand_in = _FIELDS[field]
            if not acceptable(value):
                if stand_in is None:
                    return None
                value = stand_in
            fields[field] = value
        return template.format(**fields)
    return None


def exception_name(text) -> str:
    """The exception a sandbox's error text names (``"Name"`` or ``"Name: message"``), if builtin or torch's."""
    if not isinstance(text, str):
        return OWN_TYPE
    name = text.split(":", 1)[0].strip()
    return name if name in EXCEPTION_NAMES else OWN_TYPE


def reason_for(text) -> str:
    """The reason that stands for one error text of a reply (see the module)."""
    if isinstance(text, str) and len(text) <= 2000:
        if text in KNOWN_TEXTS:
            return text
        words = _probe_words(text)
        if words is not None:
            return words
    return exception_name(text)


def is_exception(reason_text: str) -> bool:
    """Whether a reason names an exception (whose whole message only the student's notebook shows)."""
    return reason_text == OWN_TYPE or reason_text in EXCEPTION_NAMES or reason_text in KNOWN_TEXTS


def failure_phrase(reason_text: str) -> str:
    """"raised <exception> (where to read its whole message)", or "failed: <the probe's words>"."""
    if is_exception(reason_text):
        return f"raised {reason_text.split(':', 1)[0]} ({READ_IN_NOTEBOOK})"
    return f"failed: {reason_text}"


def screened(response: dict) -> dict:
    """``response`` with each error replaced by its reason: what a judge reads."""
    return {key: reason_for(value) if isinstance(key, str) and key.endswith(probing.ERROR_SUFFIX) else value
            for key, value in response.items()}
