"""The LMS's roster (NRPS) into a real JupyterHub configured for LTI (``configure_lti``, groups managed by
the authenticator): students and TAs in the course's groups before their first launch, a dropped student
out of them, a hub admin never touched; the launch of a provisioned student lands in the same account."""

from __future__ import annotations

import pytest

from attention_platform.hub.lti import default_role_groups
from attention_platform.hub.lti_roster import HubApi, RosterSync
from attention_platform.lms.ags import GradeService
from attention_platform.lms.nrps import members
from attention_platform.lms.outbox import Outbox
from attention_platform.lms.service_tokens import ServiceTokens, ToolCredentials
from services_lms import CLIENT_ID, ServicesLMS
from test_lti import (  # noqa: F401 - the module's hub fixture and its helpers
    ADMIN, COURSE, GRADERS, ISSUER, LEARNER, STUDENTS, TA, groups_of, hub, launch, logged_in,
)

pytest.importorskip("cryptography")
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402

TOOL_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.mark.slow
@pytest.mark.hub
def test_the_roster_reaches_the_hubs_groups_and_a_drop_ends_access(hub, tmp_path):
    lms = ServicesLMS(TOOL_KEY.public_key())
    outbox = Outbox(tmp_path / "lms-outbox.sqlite")
    try:
        service = GradeService(ServiceTokens(ToolCredentials(CLIENT_ID, lms.token_url, TOOL_KEY, "k1")))
        sync = RosterSync(HubApi(hub.base + "/hub/api", hub.token), outbox, ISSUER, default_role_groups(COURSE))
        lms.members = [{"user_id": "roster-ada", "roles": [LEARNER]}, {"user_id": "roster-bob", "roles": [LEARNER]},
                       {"user_id": "roster-tim", "roles": [TA]}]
        assert groups_of(hub, "roster-ada") is None  # never launched
        assert hub.api("POST", f"/groups/{STUDENTS}").status_code in (201, 409)
        assert hub.api("POST", f"/groups/{STUDENTS}/users", json={"users": [ADMIN]}).status_code == 200
        changes = sync.apply(members(service, lms.memberships_url))
        assert (groups_of(hub, "roster-ada"), groups_of(hub, "roster-tim")) == ([STUDENTS], [GRADERS]), changes
        assert "roster-ada: added to " + STUDENTS in changes
        assert logged_in(launch(hub, "roster-ada", [LEARNER]))  # the first launch finds the account ready
        assert groups_of(hub, "roster-ada") == [STUDENTS]

        lms.members = [{"user_id": "roster-ada", "roles": [LEARNER], "status": "Inactive"},
                       {"user_id": "roster-tim", "roles": [TA]}]  # ada made inactive, bob dropped
        changes = sync.apply(members(service, lms.memberships_url))
        assert groups_of(hub, "roster-ada") == [] and groups_of(hub, "roster-bob") == []
        assert groups_of(hub, "roster-tim") == [GRADERS]
        assert {"roster-ada: removed from " + STUDENTS, "roster-bob: removed from " + STUDENTS} <= set(changes)
        assert STUDENTS in groups_of(hub, ADMIN), "a hub admin is never changed by the roster"
        assert {row["user"] for row in outbox.roster_changes()} >= {"roster-ada", "roster-bob", "roster-tim"}

        lms.members = []  # an LMS answering an empty roster never empties the course
        with pytest.raises(Exception, match="no active member"):
            sync.apply(members(service, lms.memberships_url))
        assert groups_of(hub, "roster-tim") == [GRADERS]
    finally:
        outbox.close()
        lms.close()
