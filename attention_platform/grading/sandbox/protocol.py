"""Frames between the trusted grader and a sandbox: no pickle, bounded sizes.

A frame is an 8-byte big-endian length, one kind byte (``J`` JSON, ``W`` a
``grader_tests.wire`` message) and the payload. The reader refuses frames over
``max_bytes`` and enforces a deadline, so a sandbox can neither flood nor stall
the grader.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import time

JSON, WIRE = b"J", b"W"
DEFAULT_MAX_FRAME = 8 * 1024 * 1024


class FrameError(Exception):
    """The peer sent something that is not a well-formed frame (or too big)."""


class PeerClosed(FrameError):
    """The peer closed the connection (for a sandbox: it exited or was killed)."""


class Timeout(FrameError):
    """No complete frame before the deadline."""


def frame(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">Q", len(payload) + 1) + kind + payload


def send_frame(sock: socket.socket, kind: bytes, payload: bytes) -> None:
    sock.sendall(frame(kind, payload))


def recv_frame_with_fds(sock: socket.socket, deadline: float | None, max_bytes: int = 1 << 16,
                        max_fds: int = 1) -> tuple[object, list[int]]:
    """A JSON frame sent in one ``sendmsg`` together with file descriptors (the zygote's
    replies): returns (decoded JSON, fds). Only this frame is read: the header first (the
    descriptors arrive with it), then exactly its body, so a reply already waiting behind it
    (a connection's ``ready`` and, at once, the answer to its warm-up) stays for the next read."""
    if deadline is not None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise Timeout("deadline passed")
        sock.settimeout(remaining)
    else:
        sock.settimeout(None)
    try:
        data, fds, _, _ = socket.recv_fds(sock, 8, max_fds)
    except socket.timeout:
        raise Timeout("deadline passed") from None
    except OSError as exc:
        raise PeerClosed(str(exc)) from None
    if not data:
        raise PeerClosed("connection closed")
    if len(data) < 8:
        data += _recv_exact(sock, 8 - len(data), deadline)
    (length,) = struct.unpack(">Q", data)
    if length < 1 or length > max_bytes + 1:
        for fd in fds:
            os.close(fd)
        raise FrameError(f"frame of {length} bytes exceeds the limit of {max_bytes}")
    try:
        body = _recv_exact(sock, length, deadline)
    except (Timeout, PeerClosed):
        for fd in fds:
            os.close(fd)
        raise
    if body[:1] != JSON:
        for fd in fds:
            os.close(fd)
        raise FrameError(f"expected a JSON frame, got kind {body[:1]!r}")
    try:
        return json.loads(body[1:]), list(fds)
    except (ValueError, RecursionError) as exc:
        for fd in fds:
            os.close(fd)
        raise FrameError(f"bad JSON frame: {exc}") from None


def send_json(sock: socket.socket, obj) -> None:
    send_frame(sock, JSON, json.dumps(obj).encode())


def _recv_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Timeout("deadline passed")
            sock.settimeout(remaining)
        else:
            sock.settimeout(None)
        try:
            chunk = sock.recv(min(n - got, 1 << 20))
        except socket.timeout:
            raise Timeout("deadline passed") from None
        except OSError as exc:
            raise PeerClosed(str(exc)) from None
        if not chunk:
            raise PeerClosed("connection closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket, deadline: float | None = None, max_bytes: int = DEFAULT_MAX_FRAME,
               check_json=None):
    """The next frame: (kind, decoded JSON) or (kind, the wire message's bytes). ``check_json``
    (bytes-like -> None) looks at a JSON frame before it is parsed, and what it raises refuses the
    frame unparsed (``bounded_json.TooComplex``, or a ``FrameError`` for a sandbox's reply)."""
    (length,) = struct.unpack(">Q", _recv_exact(sock, 8, deadline))
    if length < 1 or length > max_bytes + 1:
        raise FrameError(f"frame of {length} bytes exceeds the limit of {max_bytes}")
    data = _recv_exact(sock, length, deadline)
    kind, payload = data[:1], data[1:]
    if kind == JSON:
        if check_json is not None:
            check_json(memoryview(payload))
        try:
            return kind, json.loads(payload)
        except (ValueError, RecursionError) as exc:
            raise FrameError(f"bad JSON frame: {exc}") from None
    if kind == WIRE:
        return kind, payload
    raise FrameError(f"unknown frame kind {kind!r}")
