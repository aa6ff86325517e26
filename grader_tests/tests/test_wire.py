import struct

import pytest
import torch

from grader_tests.wire import WireError, decode, encode


def test_round_trip_keeps_tensors_and_values():
    message = {
        "x": torch.randn(2, 3, 4),
        "x64": torch.randn(3, dtype=torch.float64),
        "mask": torch.ones(2, 2, dtype=torch.bool),
        "empty": torch.empty(0, 5),
        "dim": 4,
        "causal": True,
        "note": "forward.error text",
        "cases": [[1, 2, 3, True]],
    }
    back = decode(encode(message))
    for key, value in message.items():
        if isinstance(value, torch.Tensor):
            assert back[key].dtype == value.dtype and torch.equal(back[key], value)
        else:
            assert back[key] == value


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"\x00" * 4,
        struct.pack(">Q", 10_000) + b"{}",
        struct.pack(">Q", 2) + b"{}",
        struct.pack(">Q", 9) + b"not json!",
    ],
    ids=["empty", "short", "header-past-end", "missing-keys", "not-json"],
)
def test_malformed_messages_are_rejected(blob):
    with pytest.raises(WireError):
        decode(blob)


def test_tensor_claiming_more_bytes_than_sent_is_rejected():
    blob = bytearray(encode({"x": torch.zeros(4)}))
    with pytest.raises(WireError):
        decode(bytes(blob[:-4]))


def test_unknown_dtype_is_rejected():
    good = encode({"x": torch.zeros(2)})
    bad = good.replace(b'"float32"', b'"object!"')
    bad = struct.pack(">Q", struct.unpack(">Q", bad[:8])[0]) + bad[8:]
    with pytest.raises(WireError):
        decode(bad)
