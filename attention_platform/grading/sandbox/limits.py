"""The bounds of one sandbox, shared by the grader that asks and the zygote that enforces.

The zygote never takes a client's word for them: every requested value is clamped
to the zygote's own caps (:func:`clamp`), so an unprivileged grader talking to the
root broker cannot ask for a bigger sandbox than root allowed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

UID_BASE = 61000  # sandboxes run as uid/gid UID_BASE + n (n < UID_SPAN), never a real account
UID_SPAN = 2000


@dataclass
class SandboxLimits:
    """Bounds of one sandbox (one submission). Wall-clock bounds are enforced by the
    grader, the others by the kernel inside the sandbox."""

    cell_timeout: float = 60.0  # wall-clock seconds per cell (and per probe)
    notebook_timeout: float = 300.0  # wall-clock seconds for the whole submission
    cpu_seconds: int = 120  # RLIMIT_CPU of every process in the sandbox
    memory_mb: int = 1024  # memory cgroup limit (RSS the sandbox itself allocates)
    address_space_mb: int = 4096  # RLIMIT_AS (torch alone maps several hundred MB)
    nproc: int = 32  # pids cgroup and RLIMIT_NPROC (threads count)
    fsize_mb: int = 16  # RLIMIT_FSIZE: largest file a sandbox may write
    nofile: int = 128  # RLIMIT_NOFILE
    tmpfs_mb: int = 32  # size of /tmp, /dev/shm and /home/student each
    output_chars: int = 100_000  # captured stdout/stderr/display per cell
    images_per_cell: int = 8  # matplotlib figures sent back as PNG per cell (the rest are counted, not shown)
    image_bytes: int = 500_000  # largest PNG kept (8 of them fit a frame); a bigger one becomes a note
    max_frame_bytes: int = 8 * 1024 * 1024  # largest message accepted from a sandbox


# What the root broker grants at most unless started with other caps: generous enough for any
# course setting we ship, small enough that one request cannot take the machine.
BROKER_CAPS = SandboxLimits(
    cell_timeout=1800, notebook_timeout=3600, cpu_seconds=3600, memory_mb=8192, address_space_mb=16384,
    nproc=256, fsize_mb=1024, nofile=1024, tmpfs_mb=1024, output_chars=10_000_000, images_per_cell=64,
    image_bytes=5_000_000, max_frame_bytes=64 * 1024 * 1024,
)


def clamp(requested: dict, caps: SandboxLimits) -> SandboxLimits:
    """``requested`` (from an untrusted client) as limits no larger than ``caps``;
    unknown keys are dropped, missing or malformed ones take the default."""
    defaults = SandboxLimits()
    values = {}
    for field in fields(SandboxLimits):
        kind = type(getattr(defaults, field.name))
        try:
            value = kind(requested.get(field.name, getattr(defaults, field.name)))
        except (TypeError, ValueError):
            value = getattr(defaults, field.name)
        if not value >= 0:  # also refuses NaN
            value = getattr(defaults, field.name)
        values[field.name] = min(value, getattr(caps, field.name))
    return SandboxLimits(**values)


__all__ = ["BROKER_CAPS", "SandboxLimits", "UID_BASE", "UID_SPAN", "asdict", "clamp"]
