"""Accounts, sign-up and the hub's own secrets, attacked the way a stranger would.

The live tests run on the security hub (tests/conftest.py): the README's command with
real NativeAuthenticator sign-up, real Unix accounts and the real login form.
"""

from __future__ import annotations

import ipaddress
import os
import pwd
import stat
import subprocess
import sys
import time

import pytest
import requests

from attention_platform.hub import accounts
from attention_platform.hub.accounts import AccountRefused, UidRange
from attention_platform.hub.login_throttle import LoginThrottle, client_address, loopback_peer_is_ours

HUB_UIDS = UidRange()


def as_user(user: str, code: str) -> subprocess.CompletedProcess:
    entry = pwd.getpwnam(user)
    return subprocess.run([sys.executable, "-c", code], user=entry.pw_uid, group=entry.pw_gid, extra_groups=[],
                          capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})


def login(hub, username: str, password: str) -> int:
    """Status of a login through the real form: 302 is in, anything else is out."""
    http = requests.Session()
    http.get(hub.url + "/hub/login", timeout=30)
    reply = http.post(hub.url + "/hub/login?next=", data={
        "username": username, "password": password, "_xsrf": http.cookies.get("_xsrf", path="/hub/")},
        allow_redirects=False, timeout=30)
    return reply.status_code


def sign_up(hub, username: str, password: str = "a long enough passphrase 42") -> str:
    http = requests.Session()
    http.get(hub.url + "/hub/signup", timeout=30)
    reply = http.post(hub.url + "/hub/signup", data={
        "username": username, "signup_password": password, "signup_password_confirmation": password,
        "_xsrf": http.cookies.get("_xsrf", path="/hub/")}, timeout=30)
    return reply.text


# --------------------------------------------------------------------------- names, without a hub

@pytest.mark.parametrize("name, problem", [
    ("student1", None),
    ("jane.doe", None),
    ("root", "reserved"),
    ("daemon", "reserved"),
    ("nobody", "reserved"),
    ("dl-attention-grader", "reserved"),
    ("\u0456nstructor", "1 to 32 characters"),  # Cyrillic і looks like i
    ("stu\u200bdent", "1 to 32 characters"),  # zero-width space
    ("bell\x07", "1 to 32 characters"),
    ("a" * 33, "1 to 32 characters"),
    ("-dash", "1 to 32 characters"),
])
def test_name_rules(name, problem):
    found = accounts.name_problem(accounts.normalize(name))
    assert (found is None) if problem is None else (problem in found), found


def test_look_alike_forms_normalise_to_the_name_they_imitate():
    assert accounts.normalize("ＩＮＳＴＲＵＣＴＯＲ ") == "instructor"  # full-width: then refused as taken


@pytest.mark.skipif(os.geteuid() != 0, reason="creates Unix accounts")
@pytest.mark.root
def test_an_existing_system_account_is_never_a_hub_users_account(tmp_path):
    for system in ("daemon", "nobody", "root"):
        with pytest.raises(AccountRefused, match="never starts a server as such an account"):
            accounts.ensure_account(system, tmp_path / system, HUB_UIDS)
    made = accounts.ensure_account("acct-probe", tmp_path / "acct-probe", HUB_UIDS)
    try:
        assert made.pw_uid in HUB_UIDS and made.pw_gid in HUB_UIDS
        assert accounts.ensure_account("acct-probe", tmp_path / "acct-probe", HUB_UIDS).pw_uid == made.pw_uid
    finally:
        subprocess.run(["userdel", "acct-probe"], check=False)


def test_admins_have_a_login_before_anyone_can_sign_up():
    from nativeauthenticator.orm import Base, UserInfo
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from attention_platform.hub.native_auth import CourseNativeAuthenticator

    engine = create_engine("sqlite://")
    Base.metadata.create_all(engine)
    with Session(engine) as db:
        auth = CourseNativeAuthenticator(db=db, admin_users={"prof"}, admin_initial_password="initial pass 123")
        prof = UserInfo.find(db, "prof")
        assert prof is not None and prof.is_authorized and prof.is_valid_password("initial pass 123")
        assert auth.create_user("prof", "attacker's passphrase 1") is None
        assert auth.create_user("PROF", "attacker's passphrase 1") is None
        assert UserInfo.find(db, "prof").is_valid_password("initial pass 123")
        assert auth.create_user("newcomer", "a long enough passphrase 42") is not None
        assert not UserInfo.find(db, "newcomer").is_authorized  # the admin approves


# --------------------------------------------------------------------------- on the hub

@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_the_hub_database_and_secrets_are_root_only(security_hub):
    for name in ("jupyterhub.sqlite", "jupyterhub_cookie_secret", "demo-accounts.json", "formgrader-api-token",
                 "jupyterhub.log"):
        info = (security_hub.state / name).stat()
        assert info.st_uid == 0 and stat.S_IMODE(info.st_mode) == 0o600, (name, oct(info.st_mode))
    stolen = as_user("student1", f"open({str(security_hub.state / 'jupyterhub.sqlite')!r}, 'rb').read()")
    assert "PermissionError" in stolen.stderr


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_demo_accounts_live_in_the_hubs_uid_range(security_hub):
    for name in ("instructor", "ta", "student1"):
        assert pwd.getpwnam(name).pw_uid in HUB_UIDS


@pytest.mark.slow
@pytest.mark.parametrize("name", ["instructor", "Instructor", "ＩＮＳＴＲＵＣＴＯＲ", "root", "daemon", "nobody",
                                  "dl-attention-grader", "\u0456nstructor", "stu\u200bdent", "bell\x07"])
@pytest.mark.hub
@pytest.mark.root
def test_sign_up_cannot_claim_a_reserved_or_look_alike_name(security_hub, name):
    page = sign_up(security_hub, name)
    assert "alert-danger" in page, page[-1500:]
    assert login(security_hub, name, "a long enough passphrase 42") != 302


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_a_new_name_signs_up_and_waits_for_approval(security_hub):
    page = sign_up(security_hub, "newcomer")
    assert "sent to the admin" in page
    assert login(security_hub, "newcomer", "a long enough passphrase 42") != 302


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_an_admin_cannot_give_a_hub_user_a_system_accounts_name(security_hub):
    prof = security_hub.session("instructor")
    assert prof.hub_api("POST", "/users/daemon").status_code == 400


class FromAddress(requests.adapters.HTTPAdapter):
    """Connections from one loopback address (127.0.0.0/8 is all this machine): a client elsewhere."""

    def __init__(self, address: str):
        self.address = address
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        kwargs["source_address"] = (self.address, 0)
        super().init_poolmanager(*args, **kwargs)


def login_from(hub, address: str, username: str, password: str, headers: dict | None = None) -> requests.Response:
    """A login through the real form from ``address``; 302 is in."""
    http = requests.Session()
    http.mount("http://", FromAddress(address))
    http.headers.update(headers or {})  # on the form's page too: its _xsrf token is tied to the client's address
    http.get(hub.url + "/hub/login", timeout=30)
    return http.post(hub.url + "/hub/login?next=", data={
        "username": username, "password": password, "_xsrf": http.cookies.get("_xsrf", path="/hub/")},
        allow_redirects=False, timeout=30)


def told_to_wait(reply: requests.Response) -> int:
    """The seconds a refused login is told to wait (its page and Retry-After say the same), or 0."""
    if reply.status_code != 429:
        return 0
    seconds = int(reply.headers["Retry-After"])
    assert f"Please wait {seconds} second" in reply.text, reply.text[-2000:]
    return seconds


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_a_strangers_wrong_passwords_never_lock_the_owner_out(security_hub):
    """Before: after five wrong passwords from anyone the right one was refused, for everyone, and one
    more wrong one after each wait kept the name (admins too) locked for good."""
    stranger, name = "127.0.0.9", "instructor"
    for _ in range(12):
        assert login_from(security_hub, stranger, name, "not the password").status_code != 302
    assert told_to_wait(login_from(security_hub, stranger, name, security_hub.passwords[name])) > 0
    # the owner, from another address, at once
    assert login_from(security_hub, "127.0.0.1", name, security_hub.passwords[name]).status_code == 302


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_the_owners_usual_address_stays_open_to_them(security_hub):
    """A stranger behind the same address (a campus network) failing over many names slows the
    address, but not for a name that logged in from there recently."""
    shared, name = "127.0.0.5", "ta"
    assert login_from(security_hub, shared, name, security_hub.passwords[name]).status_code == 302
    for index in range(int(security_hub.env["HUB_LOGIN_ADDRESS_MAX_FAILURES"])):
        login_from(security_hub, shared, f"guess{index}", "not the password")
    assert told_to_wait(login_from(security_hub, shared, "student2", security_hub.passwords["student2"])) > 0
    assert login_from(security_hub, shared, name, security_hub.passwords[name]).status_code == 302


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_a_guesser_is_told_to_wait_longer_each_time_up_to_a_cap(security_hub):
    stranger, name = "127.0.0.7", "student3"
    failures = int(security_hub.env["HUB_LOGIN_MAX_FAILURES"])
    for _ in range(failures):
        assert login_from(security_hub, stranger, name, "not the password").status_code != 302
    waits = []
    for _ in range(4):
        wait = told_to_wait(login_from(security_hub, stranger, name, "not the password"))
        assert wait > 0
        waits.append(wait)
        time.sleep(wait + 0.5)
        assert login_from(security_hub, stranger, name, "not the password").status_code == 200  # checked, wrong
    cap = int(security_hub.env["HUB_LOGIN_MAX_WAIT_SECONDS"])
    assert waits[0] < waits[1] < waits[2] <= cap and waits[3] == cap, waits
    # the right password after the wait is accepted from there too
    time.sleep(cap + 0.5)
    assert login_from(security_hub, stranger, name, security_hub.passwords[name]).status_code == 302


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_a_forged_forwarded_address_neither_dodges_nor_throttles_anyone(security_hub):
    """The proxy appends the address it saw to X-Forwarded-For; X-Real-Ip and whatever the client wrote
    to the left are the client's own and count for nothing."""
    stranger, owner_address, name = "127.0.0.11", "127.0.0.12", "student1"
    assert login_from(security_hub, owner_address, name, security_hub.passwords[name]).status_code == 302
    waits = []
    for index in range(12):
        forged = {"X-Forwarded-For": owner_address, "X-Real-Ip": f"10.0.0.{index + 1}"}
        waits.append(told_to_wait(login_from(security_hub, stranger, name, "not the password", headers=forged)))
    assert waits[-1] > 0, waits  # the stranger is slowed whatever it claims
    assert login_from(security_hub, owner_address, name, security_hub.passwords[name]).status_code == 302


FORGER = """
import http.cookiejar, sys, urllib.request, urllib.parse
hub, name, claimed = sys.argv[1], sys.argv[2], sys.argv[3]
jar = http.cookiejar.CookieJar()
web = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
web.addheaders = [("X-Forwarded-For", claimed), ("X-Real-Ip", claimed)]  # the form's _xsrf is tied to them
web.open(hub + "/hub/login").read()
xsrf = next(cookie.value for cookie in jar if cookie.name == "_xsrf")
statuses = []
for _ in range(12):
    form = urllib.parse.urlencode({"username": name, "password": "not the password", "_xsrf": xsrf}).encode()
    request = urllib.request.Request(hub + "/hub/login?next=", data=form)
    try:
        statuses.append(web.open(request).status)
    except urllib.error.HTTPError as refused:
        statuses.append(refused.code)
print(statuses)
"""


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_a_local_process_past_the_proxy_cannot_claim_anothers_address(security_hub):
    """A student's process on the hub's machine can reach the hub's own port past the proxy and write
    X-Forwarded-For itself: its failures count against its own address, not the one it names."""
    name, claimed = "student2", "127.0.0.21"
    hub_port = security_hub.url.rsplit(":", 1)[1]
    direct = f"http://127.0.0.1:{int(hub_port) + 81}"
    forger = as_user("student1", FORGER.replace("sys.argv[1], sys.argv[2], sys.argv[3]",
                                                 f"{direct!r}, {name!r}, {claimed!r}"))
    assert "429" in forger.stdout, (forger.stdout, forger.stderr[-2000:])  # slowed, as its own address
    assert login_from(security_hub, claimed, name, security_hub.passwords[name]).status_code == 302
    time.sleep(int(security_hub.env["HUB_LOGIN_MAX_WAIT_SECONDS"]) + 0.5)  # and the forger's own wait ends:
    assert login_from(security_hub, "127.0.0.1", name, security_hub.passwords[name]).status_code == 302

# --------------------------------------------------------------------------- the login throttle, without a hub

class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_throttle_slows_a_pair_doubling_up_to_its_cap_and_a_success_clears_it():
    clock = Clock()
    throttle = LoginThrottle(3, 2, 10, address_free_failures=100, clock=clock)
    for _ in range(2):
        throttle.failed("192.0.2.1", "ann")
    assert throttle.wait("192.0.2.1", "ann") == 0
    waits = []
    for _ in range(5):
        throttle.failed("192.0.2.1", "ann")
        waits.append(throttle.wait("192.0.2.1", "ann"))
    assert waits == [2, 4, 8, 10, 10]
    assert throttle.wait("198.51.100.7", "ann") == 0  # the owner elsewhere: never locked
    clock.now += 10
    throttle.succeeded("192.0.2.1", "ann")
    throttle.failed("192.0.2.1", "ann")
    assert throttle.wait("192.0.2.1", "ann") == 0


def test_an_address_failing_over_many_names_waits_except_for_a_name_that_logged_in_there():
    clock = Clock()
    throttle = LoginThrottle(5, 1, 60, address_free_failures=4, remember_success=3600, clock=clock)
    throttle.succeeded("192.0.2.1", "ann")
    for index in range(6):
        throttle.failed("192.0.2.1", f"guess{index}")
    assert throttle.wait("192.0.2.1", "bob") > 0
    assert throttle.wait("192.0.2.1", "ann") == 0
    clock.now += 3601  # a success long ago no longer opens the address
    assert throttle.wait("192.0.2.1", "ann") == 0  # (the address's own wait has passed too)
    for index in range(6):
        throttle.failed("192.0.2.1", f"again{index}")
    assert throttle.wait("192.0.2.1", "ann") > 0


@pytest.mark.parametrize("case, peer, forwarded, trusted, from_proxy, expected", [
    ("the proxy's view: the rightmost entry", "127.0.0.1", "10.9.9.9, 192.0.2.1", [], True, "192.0.2.1"),
    ("a reverse proxy in front is skipped", "127.0.0.1", "10.9.9.9, 192.0.2.1, 203.0.113.5", ["203.0.113.5"],
     True, "192.0.2.1"),
    ("a network of reverse proxies (an ingress's pods) is skipped", "10.0.3.4", "192.0.2.1, 10.42.0.17",
     ["10.42.0.0/16"], True, "192.0.2.1"),
    ("a peer that is not the proxy is its own address", "127.0.0.1", "192.0.2.1", [], False, "127.0.0.1"),
    ("no header: the peer", "192.0.2.1", "", [], True, "192.0.2.1"),
    ("garbage: the peer", "127.0.0.1", "10.0.0.1, not-an-address", [], True, "127.0.0.1"),
])
def test_the_client_address(case, peer, forwarded, trusted, from_proxy, expected):
    assert client_address(peer, forwarded, trusted, peer_is_proxy=lambda: from_proxy) == expected, case


# /proc/net/tcp rows (sl, local, remote, state, queues, timer, retransmits, uid, timeout, inode, ...)
_TCP_HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
_PORT_7000 = "0100007F:1B58"  # 127.0.0.1:7000 as the kernel writes it


def _tcp_row(local: str, state: str, uid: int, inode: int) -> str:
    return f"   0: {local} 0100007F:1F90 {state} 00000000:00000000 00:00000000 00000000 {uid:>5} 0 {inode} 1\n"


@pytest.mark.parametrize("case, rows, owner", [
    ("one live socket", [_tcp_row(_PORT_7000, "01", 1000, 4242)], 1000),
    # a connection closed earlier on that port waits out TIME_WAIT, owned by no process (uid 0, inode 0):
    # the live socket of another user behind it is the one that is connected now
    ("an old connection in TIME_WAIT first", [_tcp_row(_PORT_7000, "06", 0, 0), _tcp_row(_PORT_7000, "01", 1000, 4242)], 1000),
    ("only TIME_WAIT", [_tcp_row(_PORT_7000, "06", 0, 0)], None),
    ("two live sockets of two users (SO_REUSEADDR)", [_tcp_row(_PORT_7000, "01", 0, 11), _tcp_row(_PORT_7000, "01", 1000, 12)], None),
    ("another port", [_tcp_row("0100007F:1B59", "01", 0, 4242)], None),
])
def test_the_owner_of_a_loopback_peer_is_the_live_socket_on_its_port(tmp_path, case, rows, owner):
    from attention_platform.hub.login_throttle import _socket_uid

    table = tmp_path / "tcp"
    table.write_text(_TCP_HEADER + "".join(rows))
    assert _socket_uid(ipaddress.ip_address("127.0.0.1"), 7000, tables=(str(table), str(tmp_path / "none"))) == owner


def test_a_loopback_connection_counts_as_the_proxys_only_if_it_is_this_users():
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    host, port = client.getsockname()
    try:
        assert loopback_peer_is_ours(host, port)  # this process's own socket
        script = ("import socket, sys; s = socket.create_connection(('127.0.0.1', int(sys.argv[1])));"
                  " print(s.getsockname()[1], flush=True); sys.stdin.read()")
        nobody = pwd.getpwnam("nobody")
        other = subprocess.Popen([sys.executable, "-c", script, str(server.getsockname()[1])], user=nobody.pw_uid,
                                 group=nobody.pw_gid, extra_groups=[], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True) if os.geteuid() == 0 else None
        if other is not None:
            try:
                assert not loopback_peer_is_ours("127.0.0.1", int(other.stdout.readline()))
            finally:
                other.kill()
                other.wait()
        assert loopback_peer_is_ours("192.0.2.1", 1234)  # not loopback: a proxy in front
    finally:
        client.close()
        server.close()


def test_a_flood_of_long_names_leaves_the_throttle_small():
    """The throttle keeps a record per (address, name) it was sent, the name as the login form gave it (up
    to the hub's 1 MB body). Names no account can have are kept cut to a bound, so many long ones cost
    the hub (root, natively) little memory, and its log lines stay short."""
    import asyncio

    from nativeauthenticator.orm import Base
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from attention_platform.hub.native_auth import CourseNativeAuthenticator
    from hub_helpers import login_request_from

    engine = create_engine("sqlite://")
    Base.metadata.create_all(engine)
    with Session(engine) as db:
        auth = CourseNativeAuthenticator(db=db)
        login = login_request_from("198.51.100.8")
        for i in range(20):
            assert asyncio.run(auth.authenticate(login, {"username": f"{i}" + "x" * 100_000, "password": "p"})) is None
    kept = [name for _, name in auth.throttle.by_pair]
    assert len(kept) == 20 and max(map(len, kept)) <= 64, max(map(len, kept))
