"""The zygote's memory on huge pages (attention_platform/grading/sandbox/huge_pages.py): which
mappings are collapsed, and a real zygote that has forked a few sandboxes holding most of its
private memory on 2 MB pages while its sandboxes stay apart."""

from __future__ import annotations

import time

import pytest

from attention_platform.grading.sandbox import SandboxLimits, Zygote, huge_pages
from attention_platform.grading.sandbox.zygote import ZygoteServer

MB = 1 << 20

MAPS = [  # (case, a /proc/PID/maps line, the spans collapsed from it)
    ("the heap, rounded in to 2 MB bounds", "00a01000-03200000 rw-p 00000000 00:00 0    [heap]",
     [(0x00c00000, 0x03200000)]),
    ("an anonymous mapping", "7f0000000000-7f0000800000 rw-p 00000000 00:00 0 ", [(0x7f0000000000, 0x7f0000800000)]),
    ("too small to hold one aligned 2 MB page", "7f0000001000-7f0000300000 rw-p 00000000 00:00 0 ", []),
    ("a library's data", "7f0000000000-7f0000800000 rw-p 00000000 08:01 42 /usr/lib/libtorch_cpu.so", []),
    ("read-only memory", "7f0000000000-7f0000800000 r--p 00000000 00:00 0 ", []),
    ("shared memory", "7f0000000000-7f0000800000 rw-s 00000000 00:01 7 /dev/zero (deleted)", []),
    ("the stack", "7ffc00000000-7ffc00800000 rw-p 00000000 00:00 0    [stack]", []),
]


@pytest.mark.parametrize("line, expected", [row[1:] for row in MAPS], ids=[row[0] for row in MAPS])
def test_which_memory_is_collapsed(line, expected):
    assert huge_pages.private_memory_spans(line) == expected


def test_spans_are_collapsed_a_chunk_at_a_time():
    span = (0x7f0000000000, 0x7f0000000000 + 9 * huge_pages.HUGE_PAGE)
    pieces = huge_pages.chunks([span])
    assert pieces[0] == (span[0], span[0] + huge_pages.CHUNK)
    assert pieces[-1][1] == span[1] and all(high - low <= huge_pages.CHUNK for low, high in pieces)
    assert sum(high - low for low, high in pieces) == span[1] - span[0]


def _memory(pid: int) -> dict[str, int]:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return {fields[0].rstrip(":"): int(fields[1]) * 1024 for fields in map(str.split, f) if len(fields) == 3}


def _run(sandbox, source: str) -> str:
    _, reply = sandbox.call({"op": "cell", "source": source})
    return "".join(out.get("text", "") or str(out.get("evalue", "")) for out in reply["outputs"])


@pytest.mark.skipif(not huge_pages.supported(), reason="this kernel has no MADV_COLLAPSE (Linux 6.1)")
@pytest.mark.root
def test_a_zygote_that_forked_a_few_sandboxes_holds_its_memory_on_huge_pages_and_they_stay_apart():
    zygote = Zygote()
    try:
        for _ in range(ZygoteServer.HUGE_PAGES_AFTER):
            zygote.spawn(SandboxLimits()).close()
        deadline = time.monotonic() + 30
        while True:
            memory = _memory(zygote.pid)
            if memory["AnonHugePages"] >= memory["Anonymous"] // 2 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert memory["AnonHugePages"] >= memory["Anonymous"] // 2, memory
        first, second = zygote.spawn(SandboxLimits()), zygote.spawn(SandboxLimits())
        try:  # a write in one sandbox to memory on a shared huge page is its own
            assert _run(first, "import torch\ntorch.nn.Linear.marker = 'first'\nprint(torch.nn.Linear.marker)") == "first\n"
            assert _run(second, "import torch\nprint(getattr(torch.nn.Linear, 'marker', 'none'))") == "none\n"
        finally:
            first.close()
            second.close()
        assert _memory(zygote.pid)["Rss"] < 600 * MB  # collapsing did not fill empty spans
    finally:
        zygote.close()
