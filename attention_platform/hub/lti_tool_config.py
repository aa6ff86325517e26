"""The tool's configuration as an LMS imports it (``GET /hub/lti13/config``, Canvas's "Paste JSON / enter URL").

ltiauthenticator 1.6.3's own handler asks for every AGS and NRPS scope and nine Canvas scopes this tool
never uses, sends the user's e-mail as a custom field, gives the host without ``/hub/`` as the target link
URI (a launch to it ends in 404) and no redirect URI. This one says what
docs/instructors/lms.md says: the hub's target link URI, login and redirect URLs and the tool's key set
(``lti_tool_keys``), and only the scopes of the LMS services this hub is set to call
(``CourseLTI13Authenticator.service_scopes``, empty when it calls none). Canvas's course-navigation
placement opens the tool in a window of its own unless LTI_PRESENTATION=embed.
"""

from __future__ import annotations

import json

from jupyterhub.handlers import BaseHandler
from jupyterhub.utils import url_path_join


class ToolConfigurationHandler(BaseHandler):
    def get(self):
        authenticator = self.authenticator
        origin = f"{authenticator.get_uri_scheme(self.request)}://{self.request.host}"
        hub = url_path_join(origin, self.hub.base_url)
        target = url_path_join(hub, "/")
        placement = {"placement": "course_navigation", "message_type": "LtiResourceLinkRequest",
                     "target_link_uri": target}
        if authenticator.presentation != "embed":
            placement["windowTarget"] = "_blank"
        configuration = {
            "title": authenticator.tool_name,
            "description": authenticator.tool_description,
            "target_link_uri": target,
            "oidc_initiation_url": url_path_join(hub, authenticator.login_url("")),
            "redirect_uris": [url_path_join(hub, authenticator.callback_url(""))],
            "public_jwk_url": url_path_join(hub, authenticator.tool_key_set_url("")),
            "scopes": list(authenticator.service_scopes),
            "extensions": [{
                "platform": "canvas.instructure.com",
                "privacy_level": "public",
                "settings": {"platform": "canvas.instructure.com", "placements": [placement]},
            }],
        }
        self.set_header("Content-Type", "application/json")
        self.write(json.dumps(configuration, indent=1))
