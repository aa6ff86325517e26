"""The control socket's frames (attention_platform/grading/sandbox/protocol.py): the zygote's replies
carry file descriptors, and two replies can wait in the socket at once (a connection's ``ready``
followed at once by the answer to the warm-up it asked for)."""

from __future__ import annotations

import os
import socket

from attention_platform.grading.sandbox import protocol
from attention_platform.grading.sandbox.zygote import send_reply


def test_replies_sent_back_to_back_are_read_one_at_a_time_each_with_its_descriptors(tmp_path):
    ours, theirs = socket.socketpair()
    passed = os.open(tmp_path, os.O_RDONLY)
    try:
        send_reply(theirs, {"op": "ready", "pid": 7})
        send_reply(theirs, {"op": "warmed", "first_uses": []})
        send_reply(theirs, {"op": "spawned", "pid": 8}, [passed])
        send_reply(theirs, {"op": "killed", "known": False})
        answers = [protocol.recv_frame_with_fds(ours, None) for _ in range(4)]
        received = [fds for _, fds in answers]
        assert [reply["op"] for reply, _ in answers] == ["ready", "warmed", "spawned", "killed"]
        assert [len(fds) for fds in received] == [0, 0, 1, 0]
        assert os.path.samestat(os.fstat(received[2][0]), os.fstat(passed))
        os.close(received[2][0])
    finally:
        os.close(passed)
        ours.close()
        theirs.close()
