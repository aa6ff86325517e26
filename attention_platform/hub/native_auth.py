"""NativeAuthenticator 1.3.0 made to run on JupyterHub 6 (two small incompatibilities).

* Its login handler times logins with ``self.statsd``, which JupyterHub 6 removed:
  every login answered 500.
* JupyterHub 6 renders a failed login through ``_render(sync=True, ...)``, which
  NativeAuthenticator's ``_render`` does not accept.

Nothing else changes: sign-up, admin approval (/hub/authorize), password change.
"""

from nativeauthenticator import NativeAuthenticator
from nativeauthenticator import handlers as native_handlers
from tornado.escape import url_escape
from tornado.httputil import url_concat


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


class CourseNativeAuthenticator(NativeAuthenticator):
    def get_handlers(self, app):
        return [(pattern, LoginHandler if handler is native_handlers.LoginHandler else handler)
                for pattern, handler in super().get_handlers(app)]
