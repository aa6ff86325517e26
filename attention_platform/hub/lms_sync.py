"""``attention-course lms-sync``: the passback worker (attention_platform/lms/worker.py) with the hub's side
of the roster (lti_roster.py), configured from the course's LTI settings."""

from __future__ import annotations

from pathlib import Path


def register(commands) -> None:
    sync = commands.add_parser(
        "lms-sync", help="send the course's counting scores to the LMS (AGS) and take its roster into the hub's "
                         "groups (NRPS), every LTI_SYNC_SECONDS (run as the grader account, as a hub service)")
    sync.add_argument("--course", type=Path, default=Path.cwd(), help="the nbgrader course directory")
    sync.add_argument("--key-file", required=True,
                      help="the tool's private key (PEM; the hub's lti-tool-key, whose public half it serves at "
                           "/hub/lti13/jwks); - reads it from standard input")
    sync.add_argument("--unix-account-names", action="store_true",
                      help="the hub's users are Unix accounts (the native hub as root): an LMS id that is no "
                           "account name is mapped as launches map it (hub/lti.py)")
    sync.add_argument("--once", action="store_true", help="one pass, then exit")
    sync.set_defaults(run=_sync)


def _sync(args) -> int:
    import logging
    import os
    import sys

    from attention_platform.course.directory import NotACourse, require_course
    from attention_platform.hub.lti import default_role_groups, parse_role_groups
    from attention_platform.lms.ags import GradeService
    from attention_platform.lms.launch_services import course_site_origins, kept_line_items_url
    from attention_platform.lms.outbox import Outbox
    from attention_platform.hub.lti_roster import HubApi, RosterSync
    from attention_platform.hub.lti_tool_keys import ToolKey
    from attention_platform.lms.service_tokens import ServiceTokens, ToolCredentials, load_private_key
    from attention_platform.lms.worker import Worker, counts_on_submit_of, outbox_path
    from attention_platform.reporting.report import default_db_url
    from attention_platform.settings import settings

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    env = settings()
    try:
        course = require_course(args.course)
    except NotACourse as exc:
        print(f"attention-course lms-sync: {exc}", file=sys.stderr)
        return 1
    missing = [name for name in ("LTI_TOKEN_URL", "LTI_ISSUER") if not getattr(env, name.lower())]
    if not env.lti_client_id:
        missing.append("LTI_CLIENT_ID")
    if missing:
        print(f"attention-course lms-sync needs {', '.join(missing)} (docs/instructors/lms.md)", file=sys.stderr)
        return 2
    tool = ToolKey(load_private_key(sys.stdin.buffer if args.key_file == "-" else args.key_file))
    credentials = ToolCredentials(env.lti_client_id[0], env.lti_token_url, tool.private_key, tool.kid)
    service = GradeService(ServiceTokens(credentials), course_site_origins(env))
    outbox = Outbox(outbox_path(course))
    roster = None
    api_url, api_token = os.environ.get("JUPYTERHUB_API_URL", ""), os.environ.get("JUPYTERHUB_API_TOKEN", "")
    if env.lti_memberships_url and api_url and api_token:
        role_groups = parse_role_groups(env.lti_role_groups) if env.lti_role_groups.strip() else \
            default_role_groups(env.nbgrader_course_id)
        roster = RosterSync(HubApi(api_url, api_token), outbox, env.lti_issuer, role_groups,
                            unix_account_names=args.unix_account_names, username_key=env.lti_username_key.strip())
    worker = Worker(outbox, service, default_db_url(course), env.lti_line_items_url, env.lti_memberships_url,
                    roster, counts_on_submit_of(course), lambda: kept_line_items_url(env))
    worker.serve(env.lti_sync_seconds, passes=1 if args.once else None)
    return 0
