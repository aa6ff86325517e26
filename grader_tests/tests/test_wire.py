import json
import struct
import tracemalloc

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


# --------------------------------------------------------------------------- amplification bombs
# A probe reply is written by student code: what decoding it costs is bounded by its size.
# tracemalloc sees every Python allocation of the decoder, the tensors' bytes included (each is
# copied out of the message into a bytearray of its own).

DECODED_PER_RECEIVED = 4
SMALL = 64 << 10  # what refusing costs whatever the size (an exception, a compiled pattern)


def _message(header: dict, body: bytes = b"") -> bytes:
    head = json.dumps(header).encode()
    return struct.pack(">Q", len(head)) + head + body


def _decode_traced(blob: bytes):
    """(refused, peak bytes allocated while decoding ``blob``)."""
    tracemalloc.start()
    try:
        try:
            decode(blob)
            refused = False
        except WireError:
            refused = True
        return refused, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _aliased_tensors(count: int, nbytes: int) -> bytes:
    meta = {"dtype": "float32", "shape": [nbytes // 4], "offset": 0, "nbytes": nbytes}
    return _message({"tensors": {f"t{i}": meta for i in range(count)}, "values": {}}, bytes(nbytes))


def _overlapping_tensors(count: int, nbytes: int) -> bytes:
    """Each tensor starts one element after the previous one: no two ranges are equal."""
    metas = {f"t{i}": {"dtype": "float32", "shape": [nbytes // 4], "offset": 4 * i, "nbytes": nbytes}
             for i in range(count)}
    return _message({"tensors": metas, "values": {}}, bytes(nbytes + 4 * count))


def _many_values(count: int) -> bytes:
    return _message({"tensors": {}, "values": {"cases": [[] for _ in range(count)]}})


def _many_empty_tensors(count: int) -> bytes:
    meta = {"dtype": "bool", "shape": [0], "offset": 0, "nbytes": 0}
    return _message({"tensors": {f"t{i}": meta for i in range(count)}, "values": {}})


def _deep_nesting(depth: int) -> bytes:
    head = b'{"tensors": {}, "values": {"v": ' + b"[" * depth + b"]" * depth + b"}}"
    return struct.pack(">Q", len(head)) + head


@pytest.mark.parametrize("blob", [
    _aliased_tensors(200, 256 << 10),
    _overlapping_tensors(200, 256 << 10),
    _many_values(1_500_000),
    _many_values(200_000),
    _many_empty_tensors(10_000),
    _deep_nesting(100_000),
    _deep_nesting(200),
], ids=["aliased-tensors", "overlapping-tensors", "millions-of-values", "values-in-a-small-header", "many-empty-tensors",
        "deep-nesting", "nesting-past-the-limit"])
def test_amplification_bombs_are_refused_before_they_are_built(blob):
    refused, peak = _decode_traced(blob)
    assert refused, "the bomb was decoded"
    assert peak <= DECODED_PER_RECEIVED * len(blob) + SMALL, f"{peak / len(blob):.1f} bytes allocated per byte received"


def test_honest_messages_cost_about_their_size():
    message = {"x": torch.randn(512, 1024), "mask": torch.ones(64, 64, dtype=torch.bool),
               "cases": [[i, i + 1, True] for i in range(200)], "note": "forward.error text"}
    blob = encode(message)
    refused, peak = _decode_traced(blob)
    assert not refused and peak <= DECODED_PER_RECEIVED * len(blob)


def test_every_check_request_still_decodes():
    from grader_tests.registry import ALL_CHECKS

    for check in ALL_CHECKS:
        request = check.build_request(check.default_seed())
        back = decode(encode(request))
        assert set(back) == set(request), check.id


def test_tensors_side_by_side_and_empty_ones_sharing_an_offset_are_accepted():
    a, b = torch.arange(6.0).reshape(2, 3), torch.ones(4, dtype=torch.int64)
    back = decode(encode({"a": a, "empty": torch.empty(0), "b": b, "empty2": torch.empty(0, 3)}))
    assert torch.equal(back["a"], a) and torch.equal(back["b"], b) and back["empty2"].shape == (0, 3)


@pytest.mark.parametrize("header", [
    {"tensors": [], "values": {}},
    {"tensors": {}, "values": []},
    {"tensors": {"x": "float32"}, "values": {}},
    {"tensors": {"x": {"dtype": "float32", "shape": [1e400], "offset": 0, "nbytes": 4}}, "values": {}},
    {"tensors": {"x": {"dtype": "float32", "shape": [1.0], "offset": 0, "nbytes": 4}}, "values": {}},
    {"tensors": {"x": {"dtype": ["float32"], "shape": [1], "offset": 0, "nbytes": 4}}, "values": {}},
], ids=["tensors-a-list", "values-a-list", "description-a-string", "infinite-dimension", "float-dimension",
        "unhashable-dtype"])
def test_malformed_headers_are_wire_errors(header):
    with pytest.raises(WireError):
        decode(_message(header, bytes(4)))


def test_a_header_of_values_costs_a_few_times_what_was_received():
    """Below every absolute limit: 15,000 empty lists in 45 kB, each a Python list of some 60 bytes."""
    blob = _many_values(15_000)
    refused, peak = _decode_traced(blob)
    assert refused and peak <= DECODED_PER_RECEIVED * len(blob) + SMALL
