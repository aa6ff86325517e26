"""A pickle-free codec for probe requests and probe responses.

A message is a flat ``{name: value}`` mapping whose values are tensors or JSON
scalars/strings/lists. Encoded, it is an 8-byte big-endian header length, a JSON
header describing every tensor (dtype, shape, byte range), then the raw bytes.
Decoding never executes anything: a sandboxed submission can send bytes, but the
trusted side only ever gets numbers and strings out of them.

A decoded message costs at most a small multiple of the bytes received, checked before
anything is built: the header's size, the number of JSON values in it and their nesting
are bounded (``check_json_shape``), and every byte of the body belongs to at most one
tensor, so a reply cannot name the same bytes a thousand times to be copied a thousand times.
"""

from __future__ import annotations

import json
import math
import re
import struct

import torch

ALLOWED_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "bool": torch.bool,
}
_NAMES = {v: k for k, v in ALLOWED_DTYPES.items()}
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
MAX_ELEMENTS = 4_000_000
MAX_HEADER_BYTES = 256 << 10  # a real message's header is a few kB
# JSON values (numbers, strings, lists, objects, keys) cost some 60 bytes each once parsed: JSON from
# a sandbox may hold a few that any message may have (a real header has a few hundred) and one more
# per 16 bytes received, so that what is parsed stays within a few times what was received.
JSON_VALUES_FREE = 1024
BYTES_PER_JSON_VALUE = 16
MAX_HEADER_VALUES = 20_000
MAX_NESTING = 8  # the header object, "values", and a value's five levels of lists, with room to spare
_JSON_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]')  # a string (skipped whole) or a mark


class WireError(ValueError):
    """A message that is not a well-formed probe message."""


def encode(message: dict) -> bytes:
    header: dict = {"tensors": {}, "values": {}}
    chunks: list[bytes] = []
    offset = 0
    for name, value in message.items():
        if isinstance(value, torch.Tensor):
            tensor = value.detach().to("cpu").contiguous()
            if tensor.dtype not in _NAMES:
                tensor = tensor.to(torch.float64)
            if tensor.dtype == torch.bfloat16:
                raw = tensor.view(torch.int16).numpy().tobytes()
            else:
                raw = tensor.numpy().tobytes()
            header["tensors"][name] = {
                "dtype": _NAMES[tensor.dtype],
                "shape": list(tensor.shape),
                "offset": offset,
                "nbytes": len(raw),
            }
            chunks.append(raw)
            offset += len(raw)
        else:
            header["values"][name] = value
    head = json.dumps(header, allow_nan=True).encode()
    return struct.pack(">Q", len(head)) + head + b"".join(chunks)


def json_values_allowed(received: int) -> int:
    """How many JSON values ``received`` bytes from a sandbox may hold (see JSON_VALUES_FREE)."""
    return JSON_VALUES_FREE + received // BYTES_PER_JSON_VALUE


def check_json_shape(text, max_values: int, max_nesting: int = MAX_NESTING) -> None:
    """Refuse JSON ``text`` (bytes-like) that would hold more than ``max_values`` values or nest
    deeper than ``max_nesting``, before it is parsed: what parsing allocates grows with the number
    of values, not with the bytes (``[],`` is three bytes and a list object of sixty), and nesting
    is what makes a parser recurse. One pass that stops at the first excess, allocating nothing
    that lasts; the count is an upper bound (every value after a container's first follows a
    comma, every key precedes a colon)."""
    values, depth = 1, 0
    for token in _JSON_TOKEN.finditer(text):
        mark = text[token.start()]
        if mark in b"[{":
            values += 1
            depth += 1
            if depth > max_nesting:
                raise WireError(f"JSON nests deeper than {max_nesting} levels")
        elif mark in b"]}":
            depth -= 1
        elif mark in b",:":
            values += 1
        if values > max_values:
            raise WireError(f"JSON holds more than {max_values} values")


def decode(blob: bytes) -> dict:
    if len(blob) < 8 or len(blob) > MAX_MESSAGE_BYTES:
        raise WireError(f"message of {len(blob)} bytes is outside the accepted size")
    (head_len,) = struct.unpack(">Q", blob[:8])
    if head_len > len(blob) - 8:
        raise WireError("header length runs past the end of the message")
    if head_len > MAX_HEADER_BYTES:
        raise WireError(f"header of {head_len} bytes is larger than {MAX_HEADER_BYTES}")
    head = memoryview(blob)[8 : 8 + head_len]
    check_json_shape(head, min(MAX_HEADER_VALUES, json_values_allowed(len(blob))))
    try:
        header = json.loads(bytes(head))
    except ValueError as exc:
        raise WireError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict) or set(header) != {"tensors", "values"}:
        raise WireError("header must have exactly 'tensors' and 'values'")
    if not isinstance(header["tensors"], dict) or not isinstance(header["values"], dict):
        raise WireError("'tensors' and 'values' must be objects")
    body = memoryview(blob)[8 + head_len :]
    message: dict = {}
    for name, value in header["values"].items():
        _check_plain(value)
        message[name] = value
    layouts = {name: _layout(meta, len(body)) for name, meta in header["tensors"].items()}
    _refuse_shared_bytes(layouts.values())
    for name, layout in layouts.items():
        message[name] = _tensor_at(layout, body)
    return message


def _check_plain(value, depth: int = 0) -> None:
    if depth > 4:
        raise WireError("values nest too deeply")
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        return
    if isinstance(value, list):
        for item in value:
            _check_plain(item, depth + 1)
        return
    raise WireError(f"value of type {type(value).__name__} is not allowed")


def _layout(meta, body_bytes: int) -> tuple[torch.dtype, list[int], int, int]:
    """A tensor description's (dtype, shape, offset, nbytes), checked against the body's length."""
    if not isinstance(meta, dict):
        raise WireError("malformed tensor description")
    dtype = ALLOWED_DTYPES.get(meta.get("dtype")) if isinstance(meta.get("dtype"), str) else None
    shape, offset, nbytes = meta.get("shape"), meta.get("offset"), meta.get("nbytes")
    if dtype is None or not isinstance(shape, list) or not all(_is_int(n) for n in [*shape, offset, nbytes]):
        raise WireError("malformed tensor description")
    if any(n < 0 for n in shape) or len(shape) > 8:
        raise WireError("tensor shape is not valid")
    count = math.prod(shape)
    if count > MAX_ELEMENTS or count * dtype.itemsize != nbytes:
        raise WireError("tensor size does not match its shape")
    if offset < 0 or offset + nbytes > body_bytes:
        raise WireError("tensor bytes run past the end of the message")
    return dtype, shape, offset, nbytes


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _refuse_shared_bytes(layouts) -> None:
    """Each byte of the body belongs to one tensor at most, so the tensors copied out of a
    message never add up to more than the message."""
    end = 0
    for _, _, offset, nbytes in sorted((layout for layout in layouts if layout[3]), key=lambda layout: layout[2]):
        if offset < end:
            raise WireError("two tensors share the same bytes")
        end = offset + nbytes


def _tensor_at(layout, body: memoryview) -> torch.Tensor:
    dtype, shape, offset, nbytes = layout
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype)
    raw = bytearray(body[offset : offset + nbytes])
    if dtype == torch.bfloat16:
        return torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16).reshape(shape)
    return torch.frombuffer(raw, dtype=dtype).reshape(shape)
