"""The red team's attacks on the exchange, each run as the attack itself (real Unix users, real nbgrader).

3   a student replaces the exchange view the hub made for them (or the grader replaces a
    student's inbound folder) with a symlink, and the hub's root pre-spawn step runs again;
4   a student hand-builds a submission of symlinks to what only the grader can read;
6   one submission without its submission_secret.txt, then "release all feedback";
8   a late submission whose folder name and timestamp.txt claim an earlier time;
9   a named pipe, a symlink to a device, an unparsable name, a flood of folders and bytes.

Students act as their own Unix users (useradd, as the hub launcher does) through their
view, as their server's kernel could; the grader's commands are real ``nbgrader`` runs with
the grader config the hub ships, as root (today's hub) and as a dedicated unprivileged
grader account (the privilege model being introduced). Everything lives in a scratch folder
under build/, removed afterwards; destructive payloads carry caps (RLIMIT_FSIZE, timeouts,
sparse files).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import resource
import secrets
import shutil
import stat
import time
from pathlib import Path

import pytest

from attention_platform.course.directory import copy_course
from attention_platform.exchange.exchange_layout import Ids
from tests.fault_helpers import ASSIGNMENT, COURSE, REPO, SWAP_FOR_LINK, add_ballast, chown_tree, hub_pre_spawn, \
    make_exchange, run_as, snapshot, unix_user, write_marker

pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="real Unix users need root (CI is root)")]

STUDENTS = ("xch-ann", "xch-bo", "xch-cy")
GRADER = "xch-grader"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
# A cap for every collect here: a copy that reads a device without end stops at 64 MB.
COLLECT_FSIZE = 64 << 20


@pytest.fixture(scope="module")
def accounts() -> dict[str, Ids]:
    homes = REPO / "build" / "exchange-attacks-homes"
    return {name: unix_user(name, homes / name, system=name == GRADER) for name in (*STUDENTS, GRADER)}


@pytest.fixture
def scratch(request):
    top = REPO / "build" / "exchange-attacks"
    top.mkdir(parents=True, exist_ok=True)
    top.chmod(0o755)
    path = top / "{}-{}".format(re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[:50], secrets.token_hex(3))
    path.mkdir(mode=0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["root-grader", "unprivileged-grader"])
def grader(request, accounts) -> Ids | None:
    """None: the grader is root (today's native hub); else the dedicated grader account."""
    return None if request.param == "root-grader" else accounts[GRADER]


def class_exchange(scratch: Path, accounts, grader, students=STUDENTS):
    ex = make_exchange(scratch, students, users={s: accounts[s] for s in students}, grader=grader)
    course = copy_course(scratch / "course")
    course.chmod(0o700)
    if grader is not None:
        chown_tree(course, grader)
    return ex, course


def now_claim(when: dt.datetime | None = None) -> str:
    """A time as nbgrader's submit writes it (folder name and timestamp.txt)."""
    return (when or dt.datetime.now(dt.timezone.utc)).strftime("%Y-%m-%d %H:%M:%S.%f %Z")


# Run as the student: build a submission folder by hand in their own inbound, through their view.
HAND_MADE = r"""
import json, os, shutil, socket, sys
spec = json.loads(sys.argv[1])
sub = spec["folder"]
os.mkdir(sub)
for src in spec.get("copy", []):
    shutil.copy(src, sub)
for name, text in spec.get("files", {}).items():
    os.makedirs(os.path.dirname(os.path.join(sub, name)), exist_ok=True)
    with open(os.path.join(sub, name), "w") as fh:
        fh.write(text)
for name, target in spec.get("links", {}).items():
    os.makedirs(os.path.dirname(os.path.join(sub, name)), exist_ok=True)
    os.symlink(target, os.path.join(sub, name))
for name in spec.get("fifos", []):
    os.mkfifo(os.path.join(sub, name))
for name in spec.get("sockets", []):
    os.chdir(sub)
    socket.socket(socket.AF_UNIX).bind(name)
for name, size in spec.get("sparse", {}).items():
    with open(os.path.join(sub, name), "wb") as fh:
        fh.truncate(size)
if "touch" in spec:  # make every mtime claim the same old time
    for root, dirs, files in os.walk(sub):
        for n in dirs + files:
            os.utime(os.path.join(root, n), (spec["touch"], spec["touch"]), follow_symlinks=False)
    os.utime(sub, (spec["touch"], spec["touch"]))
"""


def hand_made(ex, accounts, student: str, claim: str, **spec) -> Path:
    """``student`` writes a submission folder by hand; returns its path in the exchange."""
    name = f"{student}+{ASSIGNMENT}+{claim}+hand{secrets.token_hex(2)}"
    folder = ex.view(student) / COURSE / "inbound" / name
    spec.setdefault("files", {}).setdefault("timestamp.txt", claim)
    spec["folder"] = str(folder)
    done = run_as(accounts[student], HAND_MADE, json.dumps(spec))
    assert done.returncode == 0, done.stderr
    return ex.inbound(student) / name


def collect(ex, course, *args):
    def cap():
        resource.setrlimit(resource.RLIMIT_FSIZE, (COLLECT_FSIZE, COLLECT_FSIZE))

    started = time.monotonic()
    done = ex.nbgrader(course, "collect", ASSIGNMENT, *args, timeout=180, preexec_fn=cap)
    return done, time.monotonic() - started


def collected(course, student) -> Path:
    return course / "submitted" / student / ASSIGNMENT


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder``: file bytes, None for folders; symlinks fail the caller."""
    out = {}
    for path in sorted(folder.rglob("*")):
        assert not path.is_symlink(), f"collected a symlink: {path}"
        out[str(path.relative_to(folder))] = path.read_bytes() if path.is_file() else None
    return out


# ---------------------------------------------------------------------------------------------- 4
@pytest.mark.slow
def test_collect_never_follows_a_students_links_to_what_the_grader_can_read(scratch, accounts, grader):
    ex, course = class_exchange(scratch, accounts, grader)
    marker = "TOP-SECRET-" + secrets.token_hex(8)
    notes = course / "grader-notes.txt"  # the grader's own: gradebook-like
    notes.write_text(marker)
    notes.chmod(0o600)
    if grader is not None:
        os.chown(notes, grader.uid, grader.gid)
    root_only = scratch / "root-only.txt"
    root_only.write_text(marker)
    root_only.chmod(0o600)
    links = {"grader-notes.txt": str(notes), "root-only.txt": str(root_only), "shadow": "/etc/shadow",
             "grader_tests": str(REPO / "grader_tests"), "02_by_hand.ipynb": str(notes),
             "deep/er/reference.py": str(REPO / "grader_tests" / "self_attention" / "reference.py")}
    ann = "xch-ann"
    notebook = ex.home(ann) / ASSIGNMENT / NOTEBOOK
    hand_made(ex, accounts, ann, now_claim(), copy=[str(notebook)], links=links,
              files={"submission_secret.txt": secrets.token_hex(64)})
    [honest] = ex.submit("xch-bo")
    assert honest["success"], honest

    done, _ = collect(ex, course)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    got = tree(collected(course, ann))
    assert got[NOTEBOOK] == notebook.read_bytes()
    assert set(got) == {NOTEBOOK, "submission_secret.txt", "timestamp.txt", "deep", "deep/er"}, sorted(got)
    assert not [p for p, data in got.items() if data and marker.encode() in data]
    for name in links:
        assert re.search(rf"{ann}: not collected: {re.escape(name)}: a symbolic link .*\(not followed\)", log), (name, log)
    assert tree(collected(course, "xch-bo"))[NOTEBOOK] == (ex.home("xch-bo") / ASSIGNMENT / NOTEBOOK).read_bytes()


# ---------------------------------------------------------------------------------------------- 9
@pytest.mark.slow
def test_a_pipe_a_device_link_or_a_bad_name_cost_only_their_student(scratch, accounts, grader):
    ex, course = class_exchange(scratch, accounts, grader)
    notebooks = {s: ex.home(s) / ASSIGNMENT / NOTEBOOK for s in STUDENTS}
    # ann: a named pipe and a socket (a copy would block, or fail, on them)
    hand_made(ex, accounts, "xch-ann", now_claim(), copy=[str(notebooks["xch-ann"])], fifos=["answers.fifo"],
              sockets=["s.sock"])
    # bo: symlinks to devices, which the size checks skip and a copy reads without end
    hand_made(ex, accounts, "xch-bo", now_claim(), copy=[str(notebooks["xch-bo"])],
              links={"zeros.bin": "/dev/zero", "data/random.bin": "/dev/urandom"})
    # cy: a folder whose name holds no time, then an honest submission
    hand_made(ex, accounts, "xch-cy", "not-a-time", files={"note.txt": "hi"})
    time.sleep(0.05)
    [honest] = ex.submit("xch-cy")
    assert honest["success"], honest

    done, seconds = collect(ex, course)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    assert seconds < 60, seconds
    for s in STUDENTS:
        assert tree(collected(course, s))[NOTEBOOK] == notebooks[s].read_bytes(), s
    assert re.search(r"xch-ann: not collected: answers\.fifo: a named pipe", log), log
    assert re.search(r"xch-ann: not collected: s\.sock: a socket", log), log
    assert re.search(r"xch-bo: not collected: zeros\.bin: a symbolic link to /dev/zero \(not followed\)", log), log
    assert re.search(r"xch-bo: not collected: data/random\.bin: a symbolic link", log), log
    assert "answers.fifo" not in tree(collected(course, "xch-ann"))
    assert set(tree(collected(course, "xch-bo"))) == {NOTEBOOK, "timestamp.txt", "data"}


@pytest.mark.slow
def test_a_flood_of_folders_and_bytes_is_bounded_and_reported(scratch, accounts, grader):
    ex, course = class_exchange(scratch, accounts, grader)
    with open(course / "nbgrader_config.py", "a") as fh:  # the TA's limits, small enough to test
        fh.write("\nc.ExchangeLimits.student_quota_entries = 400\nc.ExchangeLimits.max_kept_submissions = 3\n"
                 "c.ExchangeLimits.max_submission_entries = 100\nc.ExchangeLimits.max_file_bytes = 2_000_000\n")
    flood = r"""
import os, sys
inbound, student, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    os.mkdir(os.path.join(inbound, f"{student}+self_attention+2031-01-01 00:00:{i % 60:02d}.000000 UTC+{i}"))
"""
    # ann: more folders than the quota lets collect read
    ann_inbound = ex.view("xch-ann") / COURSE / "inbound"
    done = run_as(accounts["xch-ann"], flood, str(ann_inbound), "xch-ann", "1000")
    assert done.returncode == 0, done.stderr
    # bo: a submission with a 1 GB (sparse) file and thousands of files, newer than the honest one
    [honest] = ex.submit("xch-bo")
    assert honest["success"], honest
    time.sleep(0.05)
    many = {f"junk/{i:04d}.txt": "x" for i in range(300)}
    hand_made(ex, accounts, "xch-bo", now_claim(), copy=[str(ex.home("xch-bo") / ASSIGNMENT / NOTEBOOK)],
              sparse={"weights.bin": 1 << 30}, files=many)
    # cy: five hand-made submissions, then the honest one: only the newest three are looked at
    for _ in range(5):
        hand_made(ex, accounts, "xch-cy", now_claim(dt.datetime(2031, 1, 1, tzinfo=dt.timezone.utc)),
                  files={"note.txt": "old"})
    time.sleep(0.05)
    [honest] = ex.submit("xch-cy")
    assert honest["success"], honest

    done, seconds = collect(ex, course)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    assert seconds < 90, seconds
    assert re.search(r"xch-ann: inbound folder holds more than 400 entries \(over the quota\)", log), log
    bo = tree(collected(course, "xch-bo"))
    assert bo[NOTEBOOK] == (ex.home("xch-bo") / ASSIGNMENT / NOTEBOOK).read_bytes()
    assert "weights.bin" not in bo
    assert re.search(r"xch-bo: not collected: weights\.bin: 1073\.7 MB, larger than the 2\.0 MB", log), log
    assert re.search(r"xch-bo: more than 100 entries in the submission", log), log
    assert len(bo) <= 100 + 1
    assert re.search(r"xch-cy: 6 submissions of 'self_attention' \(over the quota of 3\)", log), log
    assert tree(collected(course, "xch-cy"))[NOTEBOOK] == (ex.home("xch-cy") / ASSIGNMENT / NOTEBOOK).read_bytes()
    assert sum(p.stat().st_size for p in (course / "submitted").rglob("*") if p.is_file()) < 10_000_000


@pytest.mark.slow
def test_submit_refuses_what_the_course_would_not_keep_and_keeps_only_the_newest(scratch, accounts):
    ex, _course = class_exchange(scratch, accounts, None, students=("xch-ann",))
    home = ex.home("xch-ann")
    (home / "nbgrader_config.py").write_text(  # the course's limits, made small enough to test
        "c = get_config()\nc.ExchangeLimits.max_kept_submissions = 3\nc.ExchangeLimits.max_submission_bytes = 300_000\n")
    markers = []
    for i in range(5):
        write_marker(home / ASSIGNMENT, f"round-{i}")
        markers.append(f"round-{i}")
        [result] = ex.submit("xch-ann")
        assert result["success"], result
        time.sleep(0.02)
    kept = ex.submissions("xch-ann")
    assert len(kept) == 3, kept
    import nbformat

    assert sorted(nbformat.read(p / NOTEBOOK, 4).metadata["load_marker"] for p in kept) == markers[2:]

    # Over the per-submission bytes: refused, in one sentence, and nothing changes.
    add_ballast(home / ASSIGNMENT, 400)
    [refused] = ex.submit("xch-ann")
    assert refused["success"] is False
    message = refused["value"].strip().splitlines()[-1]
    assert "NOT received" in message and "0.3 MB a submission may hold" in message, message
    assert ex.submissions("xch-ann") == kept
    assert not [e for e in ex.entries("xch-ann") if e.startswith(".")]

    # Folders nested deeper than a submission may be.
    shutil.rmtree(home / ASSIGNMENT)
    shutil.copytree(ex.course / "outbound" / ASSIGNMENT, home / ASSIGNMENT)
    deep = home / ASSIGNMENT / "/".join(f"d{i}" for i in range(10))
    deep.mkdir(parents=True)
    (deep / "x.txt").write_text("x")
    chown_tree(home, accounts["xch-ann"])
    [refused] = ex.submit("xch-ann")
    message = refused["value"].strip().splitlines()[-1]
    assert refused["success"] is False and "NOT received" in message and "nested 10 levels deep" in message, message
    assert ex.submissions("xch-ann") == kept


# ---------------------------------------------------------------------------------------------- 8
@pytest.mark.slow
def test_a_late_submission_cannot_claim_an_earlier_time(scratch, accounts, grader):
    ex, course = class_exchange(scratch, accounts, grader)
    due = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=10)  # the deadline passed 10 minutes ago
    added = ex.nbgrader(course, "db", "assignment", "add", ASSIGNMENT, "--duedate", due.strftime("%Y-%m-%d %H:%M:%S UTC"))
    assert added.returncode == 0, added.stderr[-2000:]

    # ann: late work dressed up as on time: folder name, timestamp.txt and every mtime say an hour early
    early = due - dt.timedelta(hours=1)
    write_marker(ex.home("xch-ann") / ASSIGNMENT, "late-work")
    hand_made(ex, accounts, "xch-ann", now_claim(early), copy=[str(ex.home("xch-ann") / ASSIGNMENT / NOTEBOOK)],
              files={"submission_secret.txt": secrets.token_hex(64)}, touch=early.timestamp())
    # bo: honest and late
    [late] = ex.submit("xch-bo")
    assert late["success"], late
    # cy: an older folder claiming a time in the future, then an honest submission: the honest one is newest
    hand_made(ex, accounts, "xch-cy", now_claim(dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)),
              files={"note.txt": "old"})
    time.sleep(0.05)
    [honest] = ex.submit("xch-cy")
    assert honest["success"], honest
    after = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)

    done, _ = collect(ex, course)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    from nbgrader.utils import parse_utc

    ann = parse_utc((collected(course, "xch-ann") / "timestamp.txt").read_text())
    assert due.replace(tzinfo=None) < ann <= after + dt.timedelta(seconds=1), (ann, due)
    assert re.search(r"xch-ann: late: .* after the due date", log), log
    assert re.search(r"xch-ann: xch-ann\+self_attention\+\S+ \S+ UTC\+hand\w+ claims \S+ \S+ UTC, 1:\d\d:\d\d before "
                     r"the exchange received it", log), log
    [bo_sub] = ex.submissions("xch-bo")
    assert (collected(course, "xch-bo") / "timestamp.txt").read_text() == (bo_sub / "timestamp.txt").read_text()
    assert re.search(r"xch-bo: late: ", log), log
    cy = tree(collected(course, "xch-cy"))
    assert cy[NOTEBOOK] == (ex.home("xch-cy") / ASSIGNMENT / NOTEBOOK).read_bytes() and "note.txt" not in cy
    assert re.search(r"xch-cy: \S+ \S+ UTC\+hand\w+ claims .* after the exchange received it", log), log


def test_the_kernels_change_time_never_moves_back_for_a_student(scratch, accounts):
    """The clock collect trusts, checked on this machine: what a student can do to their own
    submission (utime, touch -d, rename, link, moving old files in) only moves it forward."""
    ex, _course = class_exchange(scratch, accounts, None, students=("xch-ann",))
    [result] = ex.submit("xch-ann")
    assert result["success"], result
    [sub] = ex.submissions("xch-ann")
    probe = r"""
import json, os, subprocess, sys, time
sub, spare = sys.argv[1], sys.argv[2]
def newest(top):
    best = os.lstat(top).st_ctime_ns
    for root, dirs, files in os.walk(top):
        for n in dirs + files:
            best = max(best, os.lstat(os.path.join(root, n)).st_ctime_ns)
    return best
nb = os.path.join(sub, "self_attention.ipynb")
os.makedirs(spare, exist_ok=True)
with open(os.path.join(spare, "old.txt"), "w") as fh:
    fh.write("old")
time.sleep(0.05)
steps = {
    "utime to 1970": lambda: os.utime(nb, (0, 0)),
    "utime of the folder": lambda: os.utime(sub, (0, 0)),
    "touch -d 2000-01-01": lambda: subprocess.run(["touch", "-d", "2000-01-01", nb], check=True),
    "touch -h -d of a link": lambda: (os.symlink("x", os.path.join(sub, "l")),
                                      subprocess.run(["touch", "-h", "-d", "2000-01-01", os.path.join(sub, "l")], check=True)),
    "rename inside": lambda: os.rename(nb, nb + ".moved"),
    "move an old file in": lambda: os.rename(os.path.join(spare, "old.txt"), os.path.join(sub, "old.txt")),
    "hard link an old file in": lambda: os.link(os.path.join(sub, "old.txt"), os.path.join(sub, "again.txt")),
    "rename the submission": lambda: os.rename(sub, sub + "-renamed"),
}
out = {}
for name, step in steps.items():
    before = newest(sub)
    started = time.time_ns()
    time.sleep(0.02)
    step()
    top = sub + "-renamed" if name == "rename the submission" else sub
    out[name] = [before, newest(top), started]
print(json.dumps(out))
"""
    spare = ex.view("xch-ann") / COURSE / "inbound" / ".spare"
    done = run_as(accounts["xch-ann"], probe, str(ex.view("xch-ann") / COURSE / "inbound" / sub.name), str(spare))
    assert done.returncode == 0, done.stderr
    coarse_tick_ns = 20_000_000  # ctime comes from the kernel's coarse clock
    for step, (before, after, started) in json.loads(done.stdout).items():
        assert after > before, f"{step}: the newest change time did not move ({before} -> {after})"
        assert after >= started - coarse_tick_ns, f"{step}: the newest change time is older than the step"


# ---------------------------------------------------------------------------------------------- 6
@pytest.mark.slow
def test_release_feedback_goes_on_past_a_broken_student(scratch, accounts, grader):
    from nbgrader.utils import notebook_hash

    ex, course = class_exchange(scratch, accounts, grader)
    for s in ("xch-ann", "xch-cy"):
        [result] = ex.submit(s)
        assert result["success"], result
    # bo hands in by hand, without the secret nbgrader's submit adds
    hand_made(ex, accounts, "xch-bo", now_claim(), copy=[str(ex.home("xch-bo") / ASSIGNMENT / NOTEBOOK)])
    done, _ = collect(ex, course)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    # What generate_feedback leaves: <notebook>.html beside the submission's other files.
    for s in (*STUDENTS, "ghost"):
        source = collected(course, s if s != "ghost" else "xch-ann")
        dest = course / "feedback" / s / ASSIGNMENT
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns("*.ipynb"))
        (dest / f"{ASSIGNMENT}.html").write_text(f"<html>feedback for {s}</html>")
    if grader is not None:
        chown_tree(course / "feedback", grader)

    released = ex.nbgrader(course, "release_feedback", ASSIGNMENT)
    log = released.stdout + released.stderr
    assert released.returncode == 0, log[-3000:]
    for s in ("xch-ann", "xch-cy"):
        secret = (collected(course, s) / "submission_secret.txt").read_text()
        page = ex.course / "feedback" / s / (notebook_hash(secret=secret, notebook_id=ASSIGNMENT) + ".html")
        assert page.read_text() == f"<html>feedback for {s}</html>"
        assert stat.S_IMODE(page.stat().st_mode) == 0o640
    assert os.listdir(ex.course / "feedback" / "xch-bo") == []
    assert re.search(r"Feedback for xch-bo on 'self_attention' NOT released: .*no submission_secret\.txt", log), log
    assert re.search(r"Feedback for ghost on 'self_attention' NOT released: they have no feedback folder", log), log

    # ann fetches it through her own (read-only) view, as the Assignments tab does
    fetched = ex_student_nbgrader(ex, "xch-ann", accounts, "fetch_feedback", ASSIGNMENT)
    assert fetched.returncode == 0, (fetched.stdout + fetched.stderr)[-3000:]
    pages = list((ex.home("xch-ann") / ASSIGNMENT / "feedback").rglob("*.html"))
    assert [p.read_text() for p in pages] == ["<html>feedback for xch-ann</html>"]


def ex_student_nbgrader(ex, student, accounts, *args):
    import subprocess

    from tests.fault_helpers import BIN

    ids = accounts[student]
    return subprocess.run([str(BIN / "nbgrader"), *args], cwd=ex.home(student), env=ex.student_env(student),
                          capture_output=True, text=True, timeout=300, user=ids.uid, group=ids.gid, extra_groups=[])


# ---------------------------------------------------------------------------------------------- 3
@pytest.mark.parametrize("attacker, state_left_by", [("student", "this hub"), ("student", "the previous hub"),
                                                     ("grader", "this hub")])
def test_the_hubs_root_step_follows_no_link_a_student_or_the_grader_planted(scratch, accounts, attacker,
                                                                           state_left_by):
    def spawn(user):
        hub_pre_spawn(scratch, [user], grader_user=GRADER)

    ann, grader = accounts["xch-ann"], accounts[GRADER]
    # The target: a directory the attacker cannot read (the course directory: gradebook, config).
    target = copy_course(scratch / "course")
    (target / "gradebook.db").write_text("grades")
    chown_tree(target, grader)
    target.chmod(0o700)
    before = snapshot(target)

    spawn("xch-ann")  # the student's first server start
    view = scratch / "views" / "xch-ann" / COURSE
    if state_left_by == "the previous hub":  # what the hub before this change left: views owned by the student
        for path in (view.parent, view):
            os.chown(path, ann.uid, ann.gid)
            path.chmod(0o700)
    if attacker == "student":
        swapped, who = view, ann
    else:
        swapped, who = scratch / "exchange" / COURSE / "inbound" / "xch-ann", grader
    attempt = run_as(who, SWAP_FOR_LINK, str(swapped), str(target))
    assert attempt.returncode == 0, attempt.stderr
    print(f"\n{attacker} replacing {swapped.name}: {attempt.stdout.strip()}")

    spawn("xch-ann")  # the student stops and starts their server: root's step runs again
    assert snapshot(target) == before
    leak = run_as(ann, "print(open(__import__('sys').argv[1]).read())", str(target / "gradebook.db"))
    assert leak.returncode != 0 and "PermissionError" in leak.stderr
    for path in (view.parent, view):
        st = os.lstat(path)
        assert stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o750, path
    inbound = scratch / "exchange" / COURSE / "inbound" / "xch-ann"
    assert stat.S_ISDIR(os.lstat(inbound).st_mode) and os.lstat(inbound).st_uid == ann.uid
    assert os.readlink(view / "inbound") == str(inbound)
    for sub in ("outbound", "inbound", "feedback"):
        assert os.lstat(view / sub).st_uid == 0


def test_docker_mode_lays_out_the_same_folders_with_the_containers_ids(scratch):
    """Docker: one uid for every container (1000:100), isolation by mounts; the same layout code."""
    hub_pre_spawn(scratch, ["xch-ann"], mode="docker")
    course = scratch / "exchange" / COURSE
    expected = {course: (0, 0, 0o755), course / "outbound": (1000, 100, 0o755), course / "inbound": (0, 100, 0o751),
                course / "inbound" / "xch-ann": (1000, 100, 0o2770), course / "feedback": (0, 0, 0o711),
                course / "feedback" / "xch-ann": (1000, 100, 0o2750)}
    for path, (uid, gid, mode) in expected.items():
        st = os.lstat(path)
        assert stat.S_ISDIR(st.st_mode) and (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (uid, gid, mode), path
    assert not (scratch / "views").exists()  # bind mounts stand in for views


@pytest.mark.slow
def test_an_unprivileged_grader_lists_and_releases_without_writing_the_exchange_root(scratch, accounts):
    """The formgrader calls the exchange missing when nbgrader's listing fails; the root is root's now."""
    grader = accounts[GRADER]
    ex = make_exchange(scratch, ["xch-ann"], users={"xch-ann": accounts["xch-ann"]}, grader=grader)
    course = copy_course(scratch / "course")
    shutil.copytree(ex.course / "outbound" / ASSIGNMENT, course / "release" / ASSIGNMENT)
    chown_tree(course, grader)
    shutil.rmtree(ex.course / "outbound" / ASSIGNMENT)  # the grader releases it again, below

    released = ex.nbgrader(course, "release_assignment", ASSIGNMENT)
    assert released.returncode == 0, released.stderr[-3000:]
    listed = ex.nbgrader(course, "list")
    assert listed.returncode == 0 and f"{COURSE} {ASSIGNMENT}" in listed.stdout + listed.stderr, listed.stderr[-3000:]
    removed = ex.nbgrader(course, "list", "--remove")
    assert removed.returncode == 0, removed.stderr[-3000:]
    assert not (ex.course / "outbound" / ASSIGNMENT).exists()
    st = os.stat(ex.root)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)


def _our_imports(module: str) -> set[str]:
    """The modules of our package that ``module`` imports, directly or not (relative imports resolved)."""
    import ast

    found, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        path = REPO / (name.replace(".", "/") + ".py")
        if not path.exists():
            path = REPO / name.replace(".", "/") / "__init__.py"
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package.rsplit(".", node.level - 1)[0] if node.level else ""
                target = ".".join(part for part in (base, node.module or "") if part)
                if target.startswith("attention_platform"):
                    todo.append(target)
            elif isinstance(node, ast.Import):
                todo += [alias.name for alias in node.names if alias.name.startswith("attention_platform")]
    return found


def test_the_student_image_carries_every_module_its_submit_imports():
    """The student image carries some packages of ours, named in docker/student.Dockerfile: whatever
    the exchange's submit imports from our package, directly or not (feedback on submit's refusal,
    for a terminal's ``nbgrader submit``), must be among them, with the ``__init__.py`` of each
    package on the way."""
    import re

    dockerfile = (REPO / "docker" / "student.Dockerfile").read_text()
    copied = set()
    for sources in re.findall(r"^COPY (.+) /opt/dl-attention/student-lib/", dockerfile, flags=re.M):
        for source in sources.split():  # a copied folder brings each of its files
            copied.update({str(f.relative_to(REPO)) for f in (REPO / source).rglob("*.py")} if source.endswith("/")
                          else {source})
    needed = set()
    for module in _our_imports("attention_platform.exchange.submit"):
        parts = module.split(".")
        needed.update("/".join(parts[:i]) + "/__init__.py" for i in range(1, len(parts)))
        as_file = "/".join(parts) + ".py"
        needed.add(as_file if (REPO / as_file).exists() else "/".join(parts) + "/__init__.py")
    assert "attention_platform/attempts/refusal.py" in needed  # the check sees the refusal's import
    assert needed <= copied, sorted(needed - copied)
