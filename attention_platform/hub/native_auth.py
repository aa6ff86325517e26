"""The course's login: NativeAuthenticator 1.3.0, made to run on JupyterHub 6 and closed
to the ways a stranger could use sign-up.

Made to run on JupyterHub 6:

* its login handler times logins with ``self.statsd``, which JupyterHub 6 removed
  (every login answered 500);
* JupyterHub 6 renders a failed login through ``_render(sync=True, ...)``, which
  NativeAuthenticator's ``_render`` does not accept.

Closed:

* NativeAuthenticator approves a sign-up at once when the name is a hub admin's:
  whoever signed up first as ``instructor`` became hub admin. Here the admins' logins
  exist before the hub serves anything (``initial_passwords_file``,
  ``admin_initial_password``), and sign-up refuses every admin name anyway;
* names are NFKC-normalised and lower-cased, then must be plain ASCII and not
  reserved or a system account (``attention_platform/hub/accounts.py``); sign-up
  says which rule a name broke;
* failed logins slow down their source, not the account (``attention_platform/hub/login_throttle.py``):
  NativeAuthenticator locked a name after five failures from anyone, so a stranger kept its owner,
  admins included, out for good. A throttled try is refused before its password is looked at, and
  its page says how long to wait (status 429, ``Retry-After``).
"""

import ipaddress
import json
import math

import bcrypt
from nativeauthenticator import NativeAuthenticator
from nativeauthenticator import handlers as native_handlers
from nativeauthenticator.orm import UserInfo
from tornado.escape import url_escape
from tornado.httputil import url_concat
from traitlets import Integer, List, Unicode

from attention_platform.hub import accounts
from attention_platform.hub.login_throttle import LoginThrottle, client_address, loopback_peer_is_ours


class _NoTimer:
    def timer(self, *args, **kwargs):
        return self

    def start(self):
        return self

    def stop(self, *args, **kwargs):
        return None


class LoginHandler(native_handlers.LoginHandler):
    statsd = _NoTimer()

    def _render(self, login_error=None, username=None, sync=False, **_ignored):
        return self.render_template(
            "native-login.html",
            sync=sync,
            next=url_escape(self.get_argument("next", default="")),
            username=username,
            login_error=login_error,
            custom_html=self.authenticator.custom_html,
            login_url=self.settings["login_url"],
            enable_signup=self.authenticator.enable_signup,
            two_factor_auth=self.authenticator.allow_2fa,
            authenticator_login_url=url_concat(
                self.authenticator.login_url(self.hub.base_url), {"next": self.get_argument("next", "")}
            ),
        )

    async def post(self):
        """NativeAuthenticator's login, which also says how long a throttled source is to wait."""
        data = {arg: self.get_argument(arg, strip=False) for arg in self.request.arguments}
        user = await self.login_user(data)
        if user:
            self._jupyterhub_user = user
            return self.redirect(self.get_next_url(user))
        wait = getattr(self, "login_wait", 0)
        if wait:
            seconds = math.ceil(wait)
            self.set_status(429)
            self.set_header("Retry-After", str(seconds))
            error = (f"Too many failed logins from where you are. Please wait {seconds} "
                     f"second{'s' if seconds != 1 else ''}, then try again.")
        else:
            error = "Invalid username or password."
            known = self.authenticator.get_user(data.get("username", ""))
            if known is not None and not known.is_authorized and known.is_valid_password(data.get("password", "")):
                error = f"User {data['username']} has not been authorized by an administrator yet."
        self.finish(await self._render(login_error=error, username=data.get("username")))


class SignUpHandler(native_handlers.SignUpHandler):
    """Sign-up that says which naming rule a refused name broke."""

    async def post(self):
        self._attempted_name = self.get_body_argument("username", "", strip=False)
        return await super().post()

    def get_result_message(self, user, *args, **kwargs):
        problem = self.authenticator.sign_up_problem(getattr(self, "_attempted_name", ""))
        if user is None and problem:
            return "alert-danger", problem
        return super().get_result_message(user, *args, **kwargs)


NAME_KEPT = 64  # characters of a login's name kept; account names are at most 32


class CourseNativeAuthenticator(NativeAuthenticator):
    initial_passwords_file = Unicode(
        "", help="JSON file {user: password} whose logins are created, approved, before the hub serves anything "
                 "(users that exist keep their password). The native launcher's demo accounts come from here.",
    ).tag(config=True)
    admin_initial_password = Unicode(
        "", help="Password given to each admin user that has no login yet, when the hub starts, so that no "
                 "stranger can sign up under an admin's name first.",
    ).tag(config=True)

    login_backoff_max_seconds = Integer(
        900, help="Longest wait a source of failed logins is given; the wait starts at seconds_before_next_try "
                  "once allowed_failed_logins failures came from one (address, name) and doubles with each "
                  "further failure.",
    ).tag(config=True)
    address_allowed_failed_logins = Integer(
        20, help="Failed logins from one client address, over all names, before that address waits too "
                 "(except for a name that logged in from there recently).",
    ).tag(config=True)

    trusted_proxy_networks = List(
        Unicode(), help="Networks (CIDR) of reverse proxies in front of the hub's proxy, e.g. an ingress's pods: "
                        "a login counts against the client address they forward, not theirs. Like "
                        "JupyterHub.trusted_downstream_ips (also skipped), but for whole networks.",
    ).tag(config=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for network in self.trusted_proxy_networks:
            ipaddress.ip_network(network, strict=False)  # a typo stops the hub here, not every login
        self.throttle = LoginThrottle(self.allowed_failed_logins, self.seconds_before_next_try,
                                      self.login_backoff_max_seconds,
                                      address_free_failures=self.address_allowed_failed_logins)
        self.create_initial_logins()

    def client_address(self, request) -> str:
        peer = request.connection.context.address
        host, port = (peer[0], peer[1]) if isinstance(peer, tuple) else (str(peer), 0)
        return client_address(host, request.headers.get("X-Forwarded-For", ""),
                              [*(getattr(self.parent, "trusted_downstream_ips", None) or []),
                               *self.trusted_proxy_networks],
                              peer_is_proxy=lambda: loopback_peer_is_ours(host, port))

    async def authenticate(self, handler, data):
        """NativeAuthenticator's checks, behind the throttle of the client's address (in place of its lock-out)."""
        # what the form says, up to the hub's body limit: a longer name is no account's (NAME_PATTERN), so
        # the throttle's records and the log keep it cut to a bound
        name = self.normalize_username(data["username"])[:NAME_KEPT]
        address = self.client_address(handler.request)
        wait = self.throttle.wait(address, name)
        if wait > 0:
            handler.login_wait = wait
            self.log.warning("login of %r from %s refused unchecked: %.0f s to wait", name, address, wait)
            return None
        user = self.get_user(name)
        valid = user is not None and user.is_authorized and user.is_valid_password(data["password"])
        if valid and user.has_2fa:
            valid = user.is_valid_token(data.get("2fa"))
        if valid:
            self.throttle.succeeded(address, name)
            return name
        self.throttle.failed(address, name)
        return None

    def normalize_username(self, username):
        return accounts.normalize(super().normalize_username(username))

    def sign_up_problem(self, username: str) -> str | None:
        """Why ``username`` may not sign up, in one sentence for the person, or None."""
        name = self.normalize_username(username or "")
        if name in self.admin_users:
            return f"The name {name!r} is reserved; please choose another."
        return accounts.name_problem(name)

    def validate_username(self, username):
        return super().validate_username(username) and accounts.name_problem(username) is None

    def create_user(self, username, password, **kwargs):
        if self.sign_up_problem(username) is not None:
            return None
        return super().create_user(username, password, **kwargs)

    def create_initial_logins(self) -> None:
        wanted = {}
        if self.initial_passwords_file:
            with open(self.initial_passwords_file) as f:
                wanted.update(json.load(f))
        if self.admin_initial_password:
            wanted.update({name: self.admin_initial_password for name in self.admin_users if name not in wanted})
        for name, password in wanted.items():
            name = self.normalize_username(name)
            if UserInfo.find(self.db, name) is None:
                hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt())
                self.db.add(UserInfo(username=name, password=hashed, is_authorized=True))
        self.db.commit()
        missing = [name for name in self.admin_users if UserInfo.find(self.db, name) is None]
        if missing:
            self.log.warning("admin users without a login: %s; set HUB_ADMIN_INITIAL_PASSWORD (sign-up refuses "
                             "admin names)", ", ".join(sorted(missing)))

    def get_handlers(self, app):
        replaced = {native_handlers.LoginHandler: LoginHandler, native_handlers.SignUpHandler: SignUpHandler}
        return [(pattern, replaced.get(handler, handler)) for pattern, handler in super().get_handlers(app)]
