"""Assignment and Grade Services (LTI AGS 2.0): a line item per assignment and scores posted to it.

A line item is the LMS's gradebook column. The tool finds the one it made for an assignment by
``resourceId`` (the assignment's name) among the context's line items, or the one the launch named
(the endpoint claim's ``lineitem``), and creates it otherwise, out of the assignment's points.
A score carries the student's LMS user id, the points and the grading progress: ``PendingManual``
while a TA still has written answers to grade, ``FullyGraded`` once none is left.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit, urlunsplit

from attention_platform.lms.bounded_http import Answer, LmsUnavailable, exchange
from attention_platform.lms.service_tokens import (
    LINE_ITEM_SCOPE, RESULT_SCOPE, SCORE_SCOPE, ServiceTokens,
)

LINE_ITEM = "application/vnd.ims.lis.v2.lineitem+json"
LINE_ITEMS = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE = "application/vnd.ims.lis.v1.score+json"
RESULTS = "application/vnd.ims.lis.v2.resultcontainer+json"
TAG = "attention-course"


class ServiceRefused(Exception):
    """The LMS refused a service request for good (not a matter of trying later); the message says how."""


@dataclass(frozen=True)
class Score:
    user_id: str  # the LMS's id of the student (the launch's sub)
    given: float
    maximum: float
    pending_manual: bool
    timestamp: dt.datetime

    def document(self) -> dict:
        return {"userId": self.user_id, "scoreGiven": self.given, "scoreMaximum": self.maximum,
                "activityProgress": "Completed",
                "gradingProgress": "PendingManual" if self.pending_manual else "FullyGraded",
                "timestamp": self.timestamp.astimezone(dt.timezone.utc).isoformat(timespec="milliseconds")}


def service_url(base: str, suffix: str, query: dict | None = None) -> str:
    """``base`` with ``/suffix`` added to its path and ``query`` to its query (AGS §3.2: a line item's
    URL may carry a query, which the scores and results URLs keep)."""
    parts = urlsplit(base)
    path = parts.path.rstrip("/") + ("/" + suffix if suffix else "")
    extra = urlencode(query or {})
    return urlunsplit((parts.scheme, parts.netloc, path, "&".join(q for q in (parts.query, extra) if q), ""))


def checked(answer: Answer, what: str) -> Answer:
    if answer.status >= 500 or answer.status == 429:
        raise LmsUnavailable(f"{what}: the LMS answered {answer.status}: {answer.text()}")
    if not 200 <= answer.status < 300:
        raise ServiceRefused(f"{what}: the LMS answered {answer.status}: {answer.text()}")
    return answer


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{(parts.hostname or '').lower()}:{parts.port or ''}"


class GradeService:
    """The platform's services, called with tokens from ``tokens``; a URL whose origin is not the token
    endpoint's (or one of ``origins``) is refused before any token is sent to it, so a service URL taken
    from a launch can never make the tool hand its bearer token to another site."""

    def __init__(self, tokens: ServiceTokens, origins: tuple[str, ...] = ()):
        self.tokens = tokens
        self.origins = {origin(tokens.credentials.token_url), *map(origin, origins)}

    def call(self, method: str, url: str, scopes: tuple[str, ...], accept: str, what: str,
             body: dict | None = None, content_type: str | None = None) -> Answer:
        """One request with a token for ``scopes``; a 401 gets one more try with a new token."""
        if origin(url) not in self.origins:
            raise ServiceRefused(f"{what}: {url[:200]} is not on the LMS's site ({', '.join(sorted(self.origins))}); "
                                 "no token is sent there")
        for attempt in (1, 2):
            headers = {"Authorization": "Bearer " + self.tokens.token(*scopes), "Accept": accept}
            if content_type:
                headers["Content-Type"] = content_type
            answer = exchange(method, url, headers=headers, body=body)
            if answer.status != 401 or attempt == 2:
                return checked(answer, what)
            self.tokens.forget(*scopes)
        raise AssertionError("unreachable")

    def line_item(self, line_items_url: str, assignment: str, max_points: float, label: str | None = None) -> str:
        """The URL of the line item of ``assignment`` in the context whose line items are at ``line_items_url``:
        the one with its resourceId, or one made now."""
        answer = self.call("GET", service_url(line_items_url, "", {"resource_id": assignment}),
                           (LINE_ITEM_SCOPE,), LINE_ITEMS, f"line items of {assignment}")
        items = answer.json()
        if isinstance(items, list):
            for item in items:
                if isinstance(item, dict) and item.get("resourceId") == assignment and isinstance(item.get("id"), str):
                    return item["id"]
        made = self.call("POST", line_items_url, (LINE_ITEM_SCOPE,), LINE_ITEM, f"new line item for {assignment}",
                         body={"scoreMaximum": max_points, "label": label or assignment, "resourceId": assignment,
                               "tag": TAG}, content_type=LINE_ITEM).json()
        if not isinstance(made, dict) or not isinstance(made.get("id"), str):
            raise ServiceRefused(f"new line item for {assignment}: the LMS's answer names no line item id")
        return made["id"]

    def post_score(self, line_item_url: str, score: Score) -> Answer:
        return self.call("POST", service_url(line_item_url, "scores"), (SCORE_SCOPE,), "application/json",
                         f"score of {score.user_id}", body=score.document(), content_type=SCORE)

    def results(self, line_item_url: str, user_id: str | None = None) -> list[dict]:
        query = {"user_id": user_id} if user_id else {}
        found = self.call("GET", service_url(line_item_url, "results", query), (RESULT_SCOPE,), RESULTS,
                          "results").json()
        return [row for row in found if isinstance(row, dict)] if isinstance(found, list) else []
