"""attention_platform/grading/sandbox/uids.py: a sandbox's uid is its own on the machine while it lives,
whichever zygotes run (the kernel counts processes, signals and inotify instances per uid)."""

import os
import signal
import socket
import subprocess
import sys

import pytest

from attention_platform.grading.sandbox import uids
from attention_platform.grading.sandbox.limits import BROKER_CAPS, UID_BASE, UID_SPAN

pytestmark = pytest.mark.root  # the claims' folder is root's
if os.geteuid() != 0:
    pytest.skip("the sandboxes' uids are claimed by root's zygotes (CI is root)", allow_module_level=True)


def test_two_zygotes_whose_uid_searches_meet_give_their_sandboxes_different_uids():
    """Each zygote starts its search at 7 × its pid + its count (round the span): two zygotes whose pids
    differ by 286 start two apart, and the first's third sandbox would meet the second's first."""
    from attention_platform.grading.sandbox.zygote import ZygoteServer

    ends = socket.socketpair()
    first, second = (ZygoteServer(ends[0], None, BROKER_CAPS, "/") for _ in range(2))
    first.pid, second.pid = 1000, 1000 + 286
    try:
        ours = [first.spec_for({})["uid"] for _ in range(3)]
        theirs = second.spec_for({})["uid"]
        assert (second.pid * 7 + 1) % UID_SPAN == (first.pid * 7 + 3) % UID_SPAN  # the two searches meet
        assert theirs not in ours and len(set(ours)) == 3
    finally:
        for server in (first, second):
            for uid in list(server.uids.held):
                server.uids.release(uid)
        for end in ends:
            end.close()


def test_a_uid_released_or_whose_holder_died_is_free_again(tmp_path):
    folder = str(tmp_path / "claims")
    ours, theirs = uids.UidClaims(folder), uids.UidClaims(folder)
    uid = ours.claim(UID_BASE + 5)
    assert theirs.claim(UID_BASE + 5) == UID_BASE + 6
    ours.release(uid)
    assert theirs.claim(UID_BASE + 5) == UID_BASE + 5
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from attention_platform.grading.sandbox import uids\n"
                               f"print(uids.UidClaims({folder!r}).claim({UID_BASE + 9}), flush=True)\n"
                               "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert int(holder.stdout.readline()) == UID_BASE + 9
        assert ours.claim(UID_BASE + 9) == UID_BASE + 10  # held by the other process
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert ours.claim(UID_BASE + 9) == UID_BASE + 9  # the kernel dropped the dead holder's lock


def test_the_search_goes_round_the_span_and_says_when_every_uid_is_held(tmp_path, monkeypatch):
    monkeypatch.setattr(uids, "UID_SPAN", 8)
    claims = uids.UidClaims(str(tmp_path / "claims"))
    last = UID_BASE + 7
    assert claims.claim(last) == last and claims.claim(last) == UID_BASE  # round to the first
    everyone = uids.UidClaims(str(tmp_path / "claims"))
    held = [everyone.claim(UID_BASE) for _ in range(6)]
    assert sorted(held) == list(range(UID_BASE + 1, UID_BASE + 7))
    with pytest.raises(OSError, match="all 8 sandbox uids are in use"):
        everyone.claim(UID_BASE)


@pytest.mark.parametrize("made_by", ["a link", "writable by others", "another owner"])
def test_a_claims_folder_that_is_not_roots_alone_is_refused(tmp_path, made_by):
    folder = tmp_path / "claims"
    if made_by == "a link":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        folder.symlink_to(tmp_path / "elsewhere")
    else:
        folder.mkdir(mode=0o700)
        if made_by == "writable by others":
            folder.chmod(0o777)
        else:
            os.chown(folder, 65534, 65534)
    claims = uids.UidClaims(str(folder))
    assert claims.problem and str(folder) in claims.problem
    with pytest.raises(OSError, match="cannot be claimed"):
        claims.claim(UID_BASE)
    assert not any((tmp_path / "elsewhere" if made_by == "a link" else folder).iterdir())


def _held_by_someone(uid: int) -> bool:
    import fcntl

    fd = os.open(os.path.join(uids.CLAIMS, str(uid)), os.O_RDONLY | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_a_zygote_holds_each_sandboxs_uid_while_it_lives_and_lets_it_go_once_it_is_reaped():
    """Else a zygote grading for weeks would run out of uids, and refuse every sandbox."""
    import time

    from attention_platform.grading.sandbox import SandboxLimits, Zygote

    zygote = Zygote()
    try:
        used = []
        for _ in range(4):
            sandbox = zygote.spawn(SandboxLimits(memory_mb=256, nproc=16))
            used.append(sandbox.spec["uid"])
            assert _held_by_someone(used[-1])  # while it lives
            sandbox.close()
        assert len(set(used)) == 4
        deadline = time.monotonic() + 10
        while any(map(_held_by_someone, used)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [uid for uid in used if _held_by_someone(uid)], "a closed sandbox's uid is still claimed"
    finally:
        zygote.close()
