"""The sandbox broker: the one root process of grading, serving an unprivileged grader.

Building a sandbox needs root (namespaces, pivot_root, a per-sandbox uid, cgroup
limits); judging a submission and rendering it for a TA must not run as root. So
the formgrader runs as the course's grader account and asks this broker, over a
Unix socket, for sandboxes. The broker accepts exactly three requests, on behalf
of a peer whose uid it checked with SO_PEERCRED:

* ``spawn`` — a fresh sandbox; the broker chooses its uid, cgroup, visible paths
  and PATH, and clamps the limits asked for to its own caps (``--max-*``). The
  grader gets the sandbox's end of a socketpair and talks to it directly.
* ``kill`` — end one of *that connection's* sandboxes and say whether it ran out
  of memory and how it ended (or nothing, if the grader asked for no reply: a
  sandbox it is done with).
* ``warm`` — pay some of ``first_use``'s optional first uses (named, from a fixed
  list) in that connection's zygote before its sandboxes are forked, if the broker
  did not pay them for everyone at its start (``--first-uses``).

It opens no file a client names, runs nothing a client sends (student code runs
only inside the sandboxes, as their own uid), and a closed connection kills every
sandbox it had. Each connection is served by a forked copy of this warm process
(torch already imported), so the first sandbox of a grader starts at once.

    python -m attention_platform.grading.sandbox.broker --socket PATH --allow-uid UID [--allow-gid GID]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import stat
import struct
import sys
from dataclasses import asdict, fields

from . import first_use, syscall_filter, zygote
from .environment import FIRST_USES_ENV, is_worker_environment, worker_environment
from .limits import BROKER_CAPS, SandboxLimits

MAX_CLIENTS = 16  # grader processes served at once (each a forked zygote)


def peer_credentials(conn: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end, as the kernel recorded it."""
    return struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))


def listen(path: str, gid: int | None) -> socket.socket:
    """A Unix socket at ``path`` that only root and group ``gid`` may connect to. Its
    folder must be root's and not writable by others: nobody can swap the socket."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, mode=0o755, exist_ok=True)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
        raise SystemExit(f"{folder} must be a folder owned by root and writable by root only")
    if os.path.lexists(path):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        server.bind(path)
    finally:
        os.umask(old)
    if gid is not None:
        os.chown(path, 0, gid)
        os.chmod(path, 0o660)
    server.listen(MAX_CLIENTS)
    return server


def serve_client(conn: socket.socket, groups, caps: SandboxLimits) -> None:
    """In a forked child: be this connection's zygote until it closes."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # not the broker's reaper: ZygoteServer reaps its own
    zygote.send_reply(conn, {"op": "ready", "pid": os.getpid(), "limits": groups.version})
    root = zygote.sandbox_root_dir()
    try:
        zygote.ZygoteServer(conn, groups, caps, root).serve()
    finally:
        try:
            os.rmdir(root)
        except OSError:
            pass


def run(path: str, allowed_uids: set[int], gid: int | None, caps: SandboxLimits, log=print,
        first_uses: tuple[str, ...] = first_use.ALL) -> int:
    """``first_uses``: the optional warm-ups paid here, once, for every connection; a connection whose
    grader asks for others pays those itself (ZygoteServer.warm). Each one paid here makes every
    sandbox a little dearer (first_use.py), so a course whose notebooks neither train nor draw
    starts its broker with none."""
    if os.geteuid() != 0:
        raise SystemExit("the sandbox broker must run as root: it builds namespaces and cgroups")
    zygote.warm_up(first_uses)
    groups, problem = zygote.limit_groups()
    problem = problem or zygote.hidden_checks_problem() or syscall_filter.unsupported()
    server = listen(path, gid)
    clients: set[int] = set()

    def reap(signum, frame):
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            clients.discard(pid)

    signal.signal(signal.SIGCHLD, reap)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    log(f"sandbox broker on {path} for uid {sorted(allowed_uids)}; limits through "
        f"{groups.version if groups else 'nothing: ' + str(problem)}; first uses paid for every connection: "
        f"{', '.join(first_uses) or 'none'}", flush=True)
    try:
        while True:
            conn, _ = server.accept()
            pid, uid, _ = peer_credentials(conn)
            if uid != 0 and uid not in allowed_uids:
                zygote.send_reply(conn, {"op": "unavailable",
                                         "error": f"uid {uid} may not use the sandbox broker"})
                conn.close()
                log(f"refused a connection from pid {pid} (uid {uid})", flush=True)
                continue
            if problem or len(clients) >= MAX_CLIENTS:
                zygote.send_reply(conn, {"op": "unavailable",
                                         "error": problem or f"the broker serves {MAX_CLIENTS} graders at most"})
                conn.close()
                continue
            child = os.fork()
            if child == 0:
                server.close()
                code = 0
                try:
                    serve_client(conn, groups, caps)
                except BaseException:  # noqa: BLE001 - the client sees its connection close
                    code = 1
                os._exit(code)
            clients.add(child)
            conn.close()
    finally:
        server.close()
        for child in clients:
            try:
                os.kill(child, signal.SIGTERM)
            except ProcessLookupError:
                pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    from attention_platform.settings import settings, settings_or_exit

    settings_or_exit("sandbox broker")  # every wrong setting named before the clean re-execution drops them
    if not is_worker_environment(os.environ):
        # Before anything is read: every sandbox is a fork of this process and can read its memory,
        # the environment it was started with included (a deployment's tokens and passwords).
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, "-m", "attention_platform.grading.sandbox.broker", *argv],
                  worker_environment())
    parser = argparse.ArgumentParser(prog="python -m attention_platform.grading.sandbox.broker",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", required=True, help="path of the Unix socket to listen on")
    parser.add_argument("--allow-uid", type=int, action="append", required=True,
                        help="uid allowed to ask for sandboxes (the grader account); repeatable")
    parser.add_argument("--allow-gid", type=int, default=None,
                        help="group that may open the socket (mode 0660); default: root only")
    for field in fields(SandboxLimits):
        parser.add_argument(f"--max-{field.name.replace('_', '-')}", type=type(getattr(BROKER_CAPS, field.name)),
                            default=getattr(BROKER_CAPS, field.name), dest=field.name,
                            help=f"largest {field.name} a grader may ask for (default %(default)s)")
    parser.add_argument("--first-uses", default=None, type=_first_uses,
                        help="optional warm-ups the broker pays once for every connection: 'all', "
                             f"'none' or a comma-separated list of {', '.join(first_use.ALL)}; a connection "
                             f"whose grader asks for others pays those itself. Default: ${FIRST_USES_ENV} "
                             "if set (how Docker Compose and Kubernetes configure it), else 'all'")
    args = parser.parse_args(argv)
    if args.first_uses is None:
        try:
            args.first_uses = _first_uses(settings().attention_sandbox_first_uses)
        except argparse.ArgumentTypeError as exc:
            parser.error(f"{FIRST_USES_ENV}: {exc}")
    caps = SandboxLimits(**{k: getattr(args, k) for k in asdict(BROKER_CAPS)})
    return run(args.socket, set(args.allow_uid), args.allow_gid, caps, first_uses=args.first_uses)


def _first_uses(argument: str) -> tuple[str, ...]:
    if argument == "all":
        return first_use.ALL
    try:
        return () if argument == "none" else first_use.parse(argument)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


if __name__ == "__main__":
    sys.exit(main())
