"""The course's roster from the LMS (NRPS) into the hub's groups, through the hub's REST API.

Each active member of the LMS course whose roles map to course groups (``LTI_ROLE_GROUPS``, the same
table launches use) gets a hub user, under the name their launch will give them (the claim LTI_USERNAME_KEY
names, read from the roster's member: ``sub`` is its ``user_id``, ``email`` its ``email``; a member
without it is named by ``user_id``, as a launch without it is by ``sub``; a ``custom_`` claim or any other the
roster does not carry cannot be matched, and the roster is then not synced at all), and those groups before
their first login. A user in a course group whom the roster no longer lists with that group (dropped,
made inactive, or given another role) is taken out of it, and a user left in no course group has their
server stopped: their access ends now, not at their next launch. Hub admins are never changed. Every
change is kept in the outbox's ``roster_changes`` for the instructor's page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote

from attention_platform.hub.lti import CourseLTI13Authenticator, groups_for_roles
from attention_platform.lms.ags import ServiceRefused
from attention_platform.lms.bounded_http import exchange
from attention_platform.lms.nrps import LOGIN_CLAIMS, Member
from attention_platform.lms.outbox import Outbox
from attention_platform.lms.worker import RosterRefused


class HubRefused(RosterRefused):
    """The hub's API refused a change; the message says which."""


@dataclass
class HubApi:
    url: str  # the hub's API, e.g. http://127.0.0.1:8081/hub/api
    token: str

    def call(self, method: str, path: str, body: dict | None = None, ok=(200, 201, 204)):
        answer = exchange(method, self.url.rstrip("/") + path, body=body,
                          headers={"Authorization": "token " + self.token})
        if answer.status not in ok:
            raise HubRefused(f"{method} {path}: the hub answered {answer.status}: {answer.text()}")
        return answer.json() if answer.body and answer.status != 204 else None

    def group_users(self, group: str) -> set[str]:
        found = self.call("GET", "/groups/" + quote(group, safe=""), ok=(200, 404))
        return set(found.get("users") or ()) if isinstance(found, dict) and "users" in found else set()

    def user(self, name: str) -> dict | None:
        found = self.call("GET", "/users/" + quote(name, safe=""), ok=(200, 404))
        return found if isinstance(found, dict) and found.get("name") == name else None


@dataclass
class RosterSync:
    hub: HubApi
    outbox: Outbox
    issuer: str
    role_groups: dict[str, list[str]]
    unix_account_names: bool = False
    username_key: str = "sub"  # LTI_USERNAME_KEY, the launch's claim the hub names users by
    changes: list[str] = field(default_factory=list)

    def __post_init__(self):
        self._naming = CourseLTI13Authenticator(unix_account_names=self.unix_account_names)
        self.username_key = self.username_key or "sub"

    def hub_name(self, member: Member) -> str:
        """The name ``member``'s launch logs in as (CourseLTI13Authenticator.hub_name of its username claim)."""
        return self._naming.hub_name(member.claim(self.username_key) or member.user_id, self.issuer)

    def apply(self, roster: list[Member]) -> list[str]:
        """Make the hub's course groups those of ``roster``; the changes made, one sentence each."""
        self.changes = []
        if self.username_key not in ("sub", *LOGIN_CLAIMS):
            raise RosterRefused(f"LTI_USERNAME_KEY={self.username_key[:80]}: the LMS's roster does not list that "
                                "claim, so its members cannot be matched to the names their launches give them; the "
                                "roster is not synced (sub or email can be matched)")
        if not any(member.active for member in roster):
            raise ServiceRefused("the LMS listed no active member of the course; the roster was left as it was "
                             "(a course is never emptied by one answer)")
        course_groups = sorted({group for groups in self.role_groups.values() for group in groups})
        wanted: dict[str, set[str]] = {}
        for member in roster:
            try:
                name = self.hub_name(member)
            except ValueError:
                continue  # an id no launch could log in with either
            groups = set(groups_for_roles(list(member.roles), self.role_groups)) if member.active else set()
            self.outbox.keep_member(name, member.user_id, sorted(groups), member.active)
            wanted.setdefault(name, set()).update(groups)
        lms_ids = {name: row["lms_id"] for name, row in self.outbox.members().items()}
        removed: set[str] = set()
        for group in course_groups:
            present = self.hub.group_users(group)
            joining = sorted(name for name, groups in wanted.items() if group in groups and name not in present)
            leaving = sorted(name for name in present if group not in wanted.get(name, set()))
            for name in joining:
                if self.hub.user(name) is None:
                    self.hub.call("POST", "/users/" + quote(name, safe=""), ok=(201, 409))
                    self._note(name, lms_ids, "hub user created from the LMS roster")
            if joining:
                self.hub.call("POST", "/groups/" + quote(group, safe=""), ok=(201, 409))
                self.hub.call("POST", f"/groups/{quote(group, safe='')}/users", {"users": joining})
                for name in joining:
                    self._note(name, lms_ids, f"added to {group}")
            leaving = [name for name in leaving if not (self.hub.user(name) or {}).get("admin")]
            if leaving:
                self.hub.call("DELETE", f"/groups/{quote(group, safe='')}/users", {"users": leaving})
                removed.update(leaving)
                for name in leaving:
                    self._note(name, lms_ids, f"removed from {group}")
        self._end_access(sorted(removed), course_groups, lms_ids)
        return self.changes

    def _end_access(self, removed: list[str], course_groups: list[str], lms_ids: dict[str, str]) -> None:
        """Stop the server of each removed user who is left in no course group."""
        for name in removed:
            user = self.hub.user(name)
            if user is None or set(user.get("groups") or ()) & set(course_groups):
                continue
            if user.get("server") or user.get("pending"):
                self.hub.call("DELETE", f"/users/{quote(name, safe='')}/server", ok=(202, 204, 400))
                self._note(name, lms_ids, "server stopped: no longer in the course")

    def _note(self, name: str, lms_ids: dict[str, str], change: str) -> None:
        self.changes.append(f"{name}: {change}")
        self.outbox.note_roster_change(name, lms_ids.get(name, ""), change)
