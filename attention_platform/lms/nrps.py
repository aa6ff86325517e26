"""Names and Role Provisioning Services (LTI NRPS 2.0): the course's members as the LMS lists them.

The memberships URL comes from the launch (``…/claim/namesroleservice``'s ``context_memberships_url``)
or the course's settings. The list may come in pages (``Link: <…>; rel="next"``); at most
``MAX_PAGES`` are read, so an LMS that links pages in a circle costs a bounded number of requests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from attention_platform.lms.ags import GradeService, ServiceRefused
from attention_platform.lms.service_tokens import MEMBERSHIP_SCOPE

MEMBERSHIPS = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
MAX_PAGES = 100
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


# Claims of a launch that the roster carries by the same name (NRPS 2.0 §2.2; the launch's sub is user_id).
LOGIN_CLAIMS = ("email", "name", "given_name", "family_name")
MAX_CLAIM = 255


@dataclass(frozen=True)
class Member:
    user_id: str
    roles: tuple[str, ...]
    active: bool
    name: str = ""
    login_claims: dict[str, str] = field(default_factory=dict, compare=False)  # those of LOGIN_CLAIMS it has

    def claim(self, key: str) -> str:
        """The member's value of a launch's claim ``key`` (``sub`` is the user id); "" when not listed."""
        return self.user_id if key == "sub" else self.login_claims.get(key, "")


def members(service: GradeService, memberships_url: str) -> list[Member]:
    """Every member the LMS lists for the context (ServiceRefused, LmsUnavailable, TokenRefused)."""
    found: dict[str, Member] = {}
    url: str | None = memberships_url
    for _ in range(MAX_PAGES):
        if url is None:
            return list(found.values())
        answer = service.call("GET", url, (MEMBERSHIP_SCOPE,), MEMBERSHIPS, "the course's roster")
        page = answer.json()
        if not isinstance(page, dict) or not isinstance(page.get("members"), list):
            raise ServiceRefused("the course's roster: the LMS's answer has no list of members")
        for entry in page["members"]:
            member = _member(entry)
            if member is not None:
                found[member.user_id] = member
        link = _NEXT.search(answer.headers.get("Link", "") or answer.headers.get("link", ""))
        url = link.group(1) if link else None
    raise ServiceRefused(f"the course's roster: more than {MAX_PAGES} pages")


def _member(entry) -> Member | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("user_id"), str) or not entry["user_id"]:
        return None
    roles = tuple(role for role in entry.get("roles") or () if isinstance(role, str))
    status = entry.get("status", "Active")
    name = entry.get("name") if isinstance(entry.get("name"), str) else ""
    claims = {key: entry[key] for key in LOGIN_CLAIMS
              if isinstance(entry.get(key), str) and 0 < len(entry[key]) <= MAX_CLAIM}
    return Member(entry["user_id"], roles, status == "Active", name[:200], claims)
