"""Which hub user names are acceptable, and the Unix account each hub user runs as.

Natively as root, a hub user's server runs as the Unix account of the same name. So a
hub user called ``root``, ``daemon`` or the grader's account would run as *that*
account. Here:

* a user name is NFKC-normalised and lower-cased, then must match
  :data:`NAME_PATTERN` (ASCII only, so look-alike letters and control characters are
  refused, not folded into someone else's name);
* :data:`RESERVED` names and every existing system account are refused;
* the hub creates each user's Unix account in its own uid range (:class:`UidRange`)
  and refuses to start a server as an account outside that range, whoever created it.
"""

from __future__ import annotations

import pwd
import re
import subprocess
import unicodedata
from dataclasses import dataclass
from pathlib import Path

NAME_PATTERN = re.compile(r"[a-z][a-z0-9._-]{0,31}")
# Names that mean something else on a machine, in a hub or in this course, whether or not
# the account exists here today.
RESERVED = frozenset({
    "root", "admin", "administrator", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news",
    "uucp", "proxy", "www-data", "backup", "list", "irc", "gnats", "nobody", "nogroup", "systemd-network",
    "systemd-resolve", "systemd-timesync", "messagebus", "sshd", "postgres", "postgresql", "mysql", "docker",
    "jovyan", "jupyter", "jupyterhub", "hub", "proxy", "grader", "nbgrader", "formgrader", "service", "services",
    "user", "users", "api", "login", "logout", "signup", "static", "health", "metrics", "spawn",
})


class AccountRefused(Exception):
    """A hub user name that must not get a server as a Unix account; the message says why."""


@dataclass(frozen=True)
class UidRange:
    """The uids (and gids) of the Unix accounts the hub creates for its users."""

    first: int = 20000
    last: int = 29999

    def __contains__(self, uid: int) -> bool:
        return self.first <= uid <= self.last


def normalize(name: str) -> str:
    return unicodedata.normalize("NFKC", name).strip().lower()


def name_problem(name: str, reserved: frozenset[str] = RESERVED, hub_uids: UidRange | None = None) -> str | None:
    """Why ``name`` (already normalised) may not be a hub user, in one sentence, or None."""
    if not NAME_PATTERN.fullmatch(name):
        return ("A user name is 1 to 32 characters: lower-case letters a-z, digits, '.', '-' and '_', "
                "starting with a letter.")
    if name in reserved or name.endswith("-grader"):
        return f"The name {name!r} is reserved; please choose another."
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    if hub_uids is not None and entry.pw_uid not in hub_uids:
        return f"The name {name!r} belongs to an account of this machine; please choose another."
    return None


def ensure_account(name: str, home: Path, hub_uids: UidRange) -> pwd.struct_passwd:
    """The Unix account of hub user ``name``, created in ``hub_uids`` if missing. An existing
    account outside the range (a system or personal account) is refused, never used."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        entry = None
    if entry is not None:
        if entry.pw_uid not in hub_uids or entry.pw_gid not in hub_uids:
            raise AccountRefused(f"hub user {name!r} would run as the existing Unix account {name!r} "
                                 f"(uid {entry.pw_uid}), outside the hub's range {hub_uids.first}-{hub_uids.last}: "
                                 "the hub never starts a server as such an account")
        return entry
    if name_problem(name) is not None:
        raise AccountRefused(f"hub user {name!r}: {name_problem(name)}")
    home.parent.mkdir(parents=True, exist_ok=True)
    limits = [f"{key}={value}" for key, value in (("UID_MIN", hub_uids.first), ("UID_MAX", hub_uids.last),
                                                  ("GID_MIN", hub_uids.first), ("GID_MAX", hub_uids.last))]
    done = subprocess.run(["useradd", *[arg for kv in limits for arg in ("-K", kv)], "--no-create-home",
                           "--home-dir", str(home), "--shell", "/bin/bash", "--user-group", name],
                          capture_output=True, text=True)
    if done.returncode:
        raise AccountRefused(f"could not create the Unix account of hub user {name!r}: {done.stderr.strip()}")
    return pwd.getpwnam(name)


def set_membership(user: str, group: str, member: bool) -> None:
    """Add ``user`` to or remove them from Unix ``group`` (as the hub's group says)."""
    import grp

    if (user in grp.getgrnam(group).gr_mem) == member:
        return
    subprocess.run(["gpasswd", "--add" if member else "--delete", user, group], check=True, capture_output=True)


def place_link(home: Path, name: str, target: str | None) -> None:
    """Make ``home/name`` a symbolic link to ``target`` (or remove our link when ``target``
    is None). ``home`` is the user's: it is entered through a descriptor opened without
    following links, and anything of theirs named ``name`` that is not a link is left alone."""
    import os
    import secrets
    import stat

    fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        if info is not None and not stat.S_ISLNK(info.st_mode):
            return
        if info is not None:
            os.unlink(name, dir_fd=fd)
        if target is None:
            return
        fresh = f".{name}-{secrets.token_hex(4)}"
        os.symlink(target, fresh, dir_fd=fd)
        owner = os.fstat(fd)
        os.chown(fresh, owner.st_uid, owner.st_gid, dir_fd=fd, follow_symlinks=False)
        os.rename(fresh, name, src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)
