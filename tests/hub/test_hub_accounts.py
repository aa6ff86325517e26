"""Accounts, sign-up and the hub's own secrets, attacked the way a stranger would.

The live tests run on the security hub (tests/conftest.py): the README's command with
real NativeAuthenticator sign-up, real Unix accounts and the real login form.
"""

from __future__ import annotations

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
def test_the_hub_database_and_secrets_are_root_only(security_hub):
    for name in ("jupyterhub.sqlite", "jupyterhub_cookie_secret", "demo-accounts.json", "formgrader-api-token",
                 "jupyterhub.log"):
        info = (security_hub.state / name).stat()
        assert info.st_uid == 0 and stat.S_IMODE(info.st_mode) == 0o600, (name, oct(info.st_mode))
    stolen = as_user("student1", f"open({str(security_hub.state / 'jupyterhub.sqlite')!r}, 'rb').read()")
    assert "PermissionError" in stolen.stderr


@pytest.mark.slow
def test_demo_accounts_live_in_the_hubs_uid_range(security_hub):
    for name in ("instructor", "ta", "student1"):
        assert pwd.getpwnam(name).pw_uid in HUB_UIDS


@pytest.mark.slow
@pytest.mark.parametrize("name", ["instructor", "Instructor", "ＩＮＳＴＲＵＣＴＯＲ", "root", "daemon", "nobody",
                                  "dl-attention-grader", "\u0456nstructor", "stu\u200bdent", "bell\x07"])
def test_sign_up_cannot_claim_a_reserved_or_look_alike_name(security_hub, name):
    page = sign_up(security_hub, name)
    assert "alert-danger" in page, page[-1500:]
    assert login(security_hub, name, "a long enough passphrase 42") != 302


@pytest.mark.slow
def test_a_new_name_signs_up_and_waits_for_approval(security_hub):
    page = sign_up(security_hub, "newcomer")
    assert "sent to the admin" in page
    assert login(security_hub, "newcomer", "a long enough passphrase 42") != 302


@pytest.mark.slow
def test_an_admin_cannot_give_a_hub_user_a_system_accounts_name(security_hub):
    prof = security_hub.session("instructor")
    assert prof.hub_api("POST", "/users/daemon").status_code == 400


@pytest.mark.slow
def test_guessing_a_password_is_throttled(security_hub):
    """25 wrong passwords, then the right one: refused until the lock-out has passed."""
    user, right = "student3", security_hub.passwords["student3"]
    for _ in range(25):
        assert login(security_hub, user, "not the password") != 302
    assert login(security_hub, user, right) != 302
    lockout = int(security_hub.env["HUB_LOGIN_LOCKOUT_SECONDS"])
    time.sleep(lockout + 2)
    assert login(security_hub, user, right) == 302
