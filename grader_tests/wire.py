"""A pickle-free codec for probe requests and probe responses.

A message is a flat ``{name: value}`` mapping whose values are tensors or JSON
scalars/strings/lists. Encoded, it is an 8-byte big-endian header length, a JSON
header describing every tensor (dtype, shape, byte range), then the raw bytes.
Decoding never executes anything: a sandboxed submission can send bytes, but the
trusted side only ever gets numbers and strings out of them.
"""

from __future__ import annotations

import json
import math
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


def decode(blob: bytes) -> dict:
    if len(blob) < 8 or len(blob) > MAX_MESSAGE_BYTES:
        raise WireError(f"message of {len(blob)} bytes is outside the accepted size")
    (head_len,) = struct.unpack(">Q", blob[:8])
    if head_len > len(blob) - 8:
        raise WireError("header length runs past the end of the message")
    try:
        header = json.loads(blob[8 : 8 + head_len])
    except ValueError as exc:
        raise WireError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict) or set(header) != {"tensors", "values"}:
        raise WireError("header must have exactly 'tensors' and 'values'")
    body = memoryview(blob)[8 + head_len :]
    message: dict = {}
    for name, value in header["values"].items():
        _check_plain(value)
        message[str(name)] = value
    for name, meta in header["tensors"].items():
        message[str(name)] = _tensor_from(meta, body)
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


def _tensor_from(meta: dict, body: memoryview) -> torch.Tensor:
    try:
        dtype = ALLOWED_DTYPES[meta["dtype"]]
        shape = [int(n) for n in meta["shape"]]
        offset, nbytes = int(meta["offset"]), int(meta["nbytes"])
    except (KeyError, TypeError, ValueError):
        raise WireError("malformed tensor description") from None
    if any(n < 0 for n in shape) or len(shape) > 8:
        raise WireError("tensor shape is not valid")
    count = math.prod(shape)
    itemsize = dtype.itemsize
    if count > MAX_ELEMENTS or count * itemsize != nbytes:
        raise WireError("tensor size does not match its shape")
    if offset < 0 or offset + nbytes > len(body):
        raise WireError("tensor bytes run past the end of the message")
    raw = bytearray(body[offset : offset + nbytes])
    if dtype == torch.bfloat16:
        return torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16).reshape(shape) if count else torch.empty(shape, dtype=dtype)
    if count == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(raw, dtype=dtype).reshape(shape)
