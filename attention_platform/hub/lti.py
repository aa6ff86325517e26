"""LMS launches (LTI 1.3) for the course hub, configured from the environment.

``jupyter_config/jupyterhub_config.py`` calls ``configure_lti(c)`` when HUB_AUTHENTICATOR=lti.
The LMS (Canvas, Moodle, …) is the identity provider: JupyterHub is the LTI 1.3
tool, built on ``ltiauthenticator.lti13`` (jupyterhub-ltiauthenticator 1.6.3) for the
OIDC login initiation → LMS authorize → signed ``id_token`` launch. Its handlers check
the JWT signature against the LMS's JWKS, expiry and age (600 s), the LTI claims, the
state cookie, and that the nonce belongs to the browser that started the login.

A valid signature only proves that some user of some course of the LMS opened the
tool. ``CourseLTI13Authenticator`` admits a launch only when it is one of *this*
course, used once, and only with the role the user holds in this course:

1. Course (``CourseLTI13CallbackHandler``). The issuer (LTI_ISSUER), the audience
   (every ``aud`` one of LTI_CLIENT_ID; ``azp``, when present or when there are several,
   too), the ``deployment_id`` (LTI_DEPLOYMENT_IDS) and the context id (LTI_CONTEXT_IDS)
   must all match, else 403 saying which. Both lists are required: with a deployment made
   at account level every course of the LMS shares its deployment id, and only the
   context tells this course from another. ``LTI_CONTEXT_IDS=*`` accepts any context and
   is safe only when every listed deployment is installed in this one course; a launch
   that names no context is refused even then.
2. Once (``SpentNonces``). The nonce of each accepted launch is kept in the hub's memory
   until the id_token could no longer pass anyway (``exp``, or ``iat`` + 600 s); a second
   launch with it is refused (403). Upstream kept the nonce only in a browser cookie, so
   a captured callback request (form and cookies) could be replayed. At most
   ``launch_nonce_capacity`` (10 000) are kept; beyond that, launches get 503 until some
   expire, rather than a live nonce being forgotten early. Because the memory does not
   survive a restart, a launch issued before the hub started is refused (the user
   launches again; an LMS whose clock runs behind ours by s seconds sees this for s
   seconds after a restart).
3. Role. Roles are compared as whole URIs with one table (LTI_ROLE_GROUPS; default):

       http://purl.imsglobal.org/vocab/lis/v2/membership#Learner
           -> nbgrader-<course>                          (student)
       http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant
           -> formgrade-<course>                         (TA)
       http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor
           -> formgrade-<course>, instructors-<course>   (instructor)

   The TA sub-role makes a TA only, even with ``membership#Instructor`` beside it (Canvas
   sends both). Every other role gives nothing: institution and system roles, other
   context roles and sub-roles (``membership/Learner#Instructor``, ``membership#Mentor``,
   ``membership/Instructor#Grader``), LTI 1.1 short names (``Instructor``) and URNs. A
   launch with none of the table's roles is refused (403, naming the roles it carried)
   rather than admitted as a student: those roles do not say that the user is enrolled
   in this course (an LMS administrator, a parent or mentor, institution staff), and a
   student account is real access — a server, the assignments, a row in the gradebook.
   Short names are not accepted because LTI 1.3 platforms send URIs and a bare
   ``Instructor`` does not say whether it is a course or an institution role.
   With ``Authenticator.manage_groups = True`` the groups of each launch replace the
   user's, so a TA who becomes a student in the LMS loses the formgrader.
4. Name. The username claim (LTI_USERNAME_KEY) must be left unchanged by NFKC and,
   lower-cased, match ``[a-z0-9][a-z0-9._@+-]{0,63}`` (no control, invisible or
   look-alike characters); it must not be a hub admin's name (``admin_users``, or made
   admin at run time), a reserved name (root, admin, nobody, daemon, …:
   ``reserved_usernames``) or a system account of this machine (uid < 1000: natively, as
   root, a hub user runs as the Unix user of that name). Otherwise 403. LTI users are
   never hub admins: an administrator signs in some other way. The claim is ``sub`` unless
   LTI_USERNAME_KEY names another: the LMS assigns it, never changes it and users cannot
   edit it. Upstream's default, ``email``, is one a user can edit in most LMSs and that
   need not be unique there, so one LMS user could launch into another's account; a
   login id in a custom claim is safe only if the LMS keeps users from editing it.
5. Unix account names (``unix_account_names``; the native hub as root, where each hub user
   runs as the Unix account of the same name, ``accounts.NAME_PATTERN``). LMS ids are rarely
   such names: Canvas sends a 36-character UUID, Moodle a number. A claim that already is one
   (and does not start with ``lti-``) is kept; any other claim of 1 to 255 characters becomes
   ``lti-`` + 16 base32 characters of SHA-256 over (issuer, claim) (``unix_account_name``):
   the same at every launch, a valid account name, and never a kept name (those never start
   with ``lti-``). The hash is plain, not keyed: the name is no secret, and the course can
   recompute it from the LMS's roster. The LMS's id of each such name is kept in
   ``lms_ids_file`` (hub state ``lti-users.json``, the hub's alone) and in the hub's log.
   Reserved names, hub admins and system accounts are refused as above.

Environment (all read when the hub starts):
    LTI_ISSUER            the platform's issuer, e.g. https://canvas.instructure.com  (required)
    LTI_CLIENT_ID         client id(s) of this tool in the LMS, comma-separated      (required)
    LTI_DEPLOYMENT_IDS    deployment id(s) of this tool that serve this course,
                          comma-separated                                             (required)
    LTI_CONTEXT_IDS       LMS course (context) id(s) of this course, comma-separated;
                          * = any course of those deployments (course-level deployments only)  (required)
    LTI_AUTHORIZE_URL     the platform's OIDC authorization endpoint                  (required)
    LTI_JWKS_URL          the platform's JWKS endpoint (public keys), fetched asynchronously and
                          kept by key id (lti_keys.py)                                 (required)
    LTI_USERNAME_KEY      id_token claim used as the hub username (default: sub; custom_<name>
                          reads the LTI custom claim <name>; if missing, ``sub``)
    LTI_ROLE_GROUPS       full role URI → groups, ``;``-separated ROLE_URI=group[,group…],
                          e.g. "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner=nbgrader-dl-attention;…"
                          (default: the table above, for NBGRADER_COURSE_ID, default dl-attention);
                          a short name such as ``Learner`` stops the hub at start-up
    LTI_URI_SCHEME        auto | https | http: scheme of the URLs the tool announces (default auto)
    LTI_ALLOW_UNMAPPED_ROLES  1: let a launch of this course with no mapped role in, with no
                          group — a bare account with its own server (default 0)
    LTI_TOOL_NAME         name shown in the LMS (default "Self-attention course")
    LTI_PRESENTATION      window | embed: how the LMS shows the tool (default window; lti_presentation.py)
    LTI_EMBED_ORIGINS     with embed: the LMS origin(s) allowed to frame the hub, comma-separated

The tool's own key pair (lti_tool_keys.py, public key set at /hub/lti13/jwks), its configuration for the
LMS (lti_tool_config.py, /hub/lti13/config) and deep linking (lti_deep_linking.py) are served beside the
launch handlers.

Note for the hub config: with managed groups JupyterHub refuses ``load_groups``
(ValueError "Group management has been offloaded to the authenticator"); groups
named in ``load_roles`` are created by JupyterHub itself, so nothing is lost by
leaving ``load_groups`` empty when LTI is on.
"""
from __future__ import annotations

import base64
import hashlib
import heapq
import json
import math
import os
import pwd
import re
import secrets
import time
import unicodedata
from pathlib import Path
from typing import Any, Callable

import jwt
from ltiauthenticator.lti13.auth import LTI13Authenticator
from ltiauthenticator.lti13.error import InvalidAudienceError, LoginError, TokenError, ValidationError
from ltiauthenticator.lti13.handlers import LTI13CallbackHandler, LTI13LoginInitHandler
from ltiauthenticator.lti13.validator import LTI13LaunchValidator
from ltiauthenticator.utils import convert_request_to_dict
from jupyterhub.utils import url_path_join
from tornado.httputil import url_concat
from tornado.web import HTTPError
from traitlets import Bool, Dict, Float, Integer, List, Set, Unicode, default

from attention_platform.settings import Settings, course_id, settings
from attention_platform.hub import accounts
from attention_platform.hub.lti_keys import KeySetUnavailable, PlatformKeys, UnknownKey
from attention_platform.lms import launch_services
from attention_platform.lms.service_tokens import scopes_for
from attention_platform.hub.lti_deep_linking import (
    DeepLinkPickerHandler, PendingRequests, deep_linking_problem, is_deep_linking_request,
)
from attention_platform.hub.lti_presentation import (
    EMBED, NEW_WINDOW_PAGE_POLICY, WINDOW, CrossSiteCookies, cross_site_cookie_options, embed_origins,
    frame_ancestors_policy, framed, new_window_page,
)
from attention_platform.hub.lti_tool_config import ToolConfigurationHandler
from attention_platform.hub.lti_tool_keys import ToolKey, ToolKeySetHandler

ROLES_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/roles"
CONTEXT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/context"
DEPLOYMENT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/deployment_id"
ANY_CONTEXT = "*"
LIS = "http://purl.imsglobal.org/vocab/lis/v2/"
LEARNER = LIS + "membership#Learner"
TEACHING_ASSISTANT = LIS + "membership/Instructor#TeachingAssistant"
INSTRUCTOR = LIS + "membership#Instructor"
USERNAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._@+-]{0,63}")
# Names that are, or commonly are, accounts of the system or of JupyterHub itself: natively
# as root a hub user runs as the Unix account of the same name, so "root" would be root.
RESERVED_USERNAMES = frozenset({
    "root", "admin", "administrator", "superuser", "sudo", "wheel", "staff", "operator", "nobody", "nogroup",
    "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy", "www-data",
    "backup", "list", "irc", "gnats", "sshd", "messagebus", "polkitd", "avahi", "postgres", "postgresql",
    "mysql", "redis", "docker", "systemd-network", "systemd-resolve", "systemd-timesync", "systemd-coredump",
    "jovyan", "jupyter", "jupyterhub", "hub", "grader", "formgrader", "nbgrader", "service", "services",
    "api", "user", "users", "guest", "anonymous", "system",
})
# Every name the hub makes from an LMS id starts so; a claim that starts so is mapped too, so a
# name kept as the LMS sent it is never one made from another user's id.
MAPPED_NAME_PREFIX = "lti-"
LMS_ID_MAX = 255  # OpenID Connect's limit for sub, which LTI 1.3 uses
# Debian's SYS_UID_MAX; 65534 and above are nobody/nfsnobody and the like.
SYSTEM_UID_MAX, OVERFLOW_UID = 999, 65534
_ABSOLUTE_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s;=,]+")


def default_role_groups(course: str | None = None) -> dict[str, list[str]]:
    course = course or course_id()
    return {
        LEARNER: [f"nbgrader-{course}"],
        TEACHING_ASSISTANT: [f"formgrade-{course}"],
        INSTRUCTOR: [f"formgrade-{course}", f"instructors-{course}"],
    }


def parse_role_groups(text: str) -> dict[str, list[str]]:
    """``"<role URI>=group[,group…];…"`` → ``{role URI: [groups]}``.

    Keys are whole role URIs because a role is only ever compared as a whole string:
    a short name such as ``Learner`` would match nothing, so it is refused here, at
    start-up, rather than silently locking everyone out."""
    mapping: dict[str, list[str]] = {}
    for part in text.replace("\n", ";").split(";"):
        if not part.strip():
            continue
        role, sep, groups = part.rpartition("=")  # group names hold no "=", so the last one separates
        role = role.strip()
        if not sep or not role:
            raise ValueError(f"LTI_ROLE_GROUPS: expected ROLE_URI=group[,group…], got {part.strip()!r}")
        if not _ABSOLUTE_URI.fullmatch(role):
            raise ValueError(f"LTI_ROLE_GROUPS: roles are full URIs such as {LEARNER}, got {role!r}")
        mapping[role] = [g.strip() for g in groups.split(",") if g.strip()]
    return mapping


def course_roles(roles: Any, mapping: dict[str, list[str]]) -> set[str]:
    """The roles of a launch that ``mapping`` names, each compared as a whole string.

    Nothing is inferred from a role's fragment: ``membership/Learner#Instructor`` or
    ``institution/person#Instructor`` are not ``membership#Instructor``. Canvas sends a TA
    as ``membership#Instructor`` plus the TA sub-role, so the sub-role takes Instructor away."""
    if not isinstance(roles, list):
        return set()
    sent = {role for role in roles if isinstance(role, str)}
    found = sent & set(mapping)
    if TEACHING_ASSISTANT in sent:
        found.discard(INSTRUCTOR)
    return found


def groups_for_roles(roles: Any, mapping: dict[str, list[str]]) -> list[str]:
    groups: set[str] = set()
    for role in course_roles(roles, mapping):
        groups.update(mapping[role])
    return sorted(groups)


def clean_username(raw: Any) -> str:
    """The hub user name for a launch's username claim: NFKC, lower-case, then the ASCII
    ``USERNAME_PATTERN``; ValueError saying why when the claim is not cleanly one.

    A claim that NFKC changes (full-width letters, ligatures, superscripts, …) is refused
    rather than folded, so ``ｉｎｓｔｒｕｃｔｏｒ`` never arrives at ``instructor`` by a side door."""
    if not isinstance(raw, str) or not raw:
        raise ValueError("it is empty")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in raw):
        raise ValueError("it contains control or invisible characters")
    if unicodedata.normalize("NFKC", raw) != raw:
        raise ValueError("it contains look-alike (compatibility) characters")
    name = raw.lower()
    if not USERNAME_PATTERN.fullmatch(name):
        raise ValueError("a user name is 1 to 64 of a-z, 0-9 and . _ @ + -, starting with a letter or digit")
    return name


def unix_account_name(issuer: str, lms_id: str) -> str:
    """The hub user name made from an LMS user id: ``lti-`` and 16 base32 characters (80 bits) of
    SHA-256 over the issuer and the id, which fits every rule of accounts.NAME_PATTERN.

    A plain hash, not a keyed one: the name is no secret and grants nothing, and anyone with the
    LMS's roster can recompute it, so it survives a lost key and matches exports to LMS rows."""
    digest = hashlib.sha256(json.dumps([issuer, lms_id]).encode()).digest()
    return MAPPED_NAME_PREFIX + base64.b32encode(digest).decode().lower()[:16]


class LmsIdTable:
    """Hub user name → the LMS's id of that user (issuer, claim, value), for every name the hub
    made from an id: a JSON file the hub alone reads and writes (mode 0600), replaced whole."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._ids: dict[str, dict[str, str]] | None = None

    def record(self, name: str, entry: dict[str, str]) -> None:
        if self._ids is None:
            try:
                self._ids = json.loads(self.path.read_text())
            except FileNotFoundError:
                self._ids = {}
        if self._ids.get(name) == entry:
            return
        self._ids[name] = entry
        fresh = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}")
        with os.fdopen(os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
            json.dump(self._ids, out, indent=1, sort_keys=True)
        os.replace(fresh, self.path)


def is_system_account(name: str) -> bool:
    """Whether ``name`` is an account of this machine's system (not a person's)."""
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return False
    return uid <= SYSTEM_UID_MAX or uid >= OVERFLOW_UID


def _shown(values: Any, limit: int = 300) -> str:
    text = ", ".join(map(str, values)) if isinstance(values, (list, tuple, set)) else str(values)
    return text if len(text) <= limit else text[:limit] + "…"


def _audiences(token: dict[str, Any]) -> list[Any]:
    aud = token.get("aud")
    return [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []


class SpentNonces:
    """Nonces of the launches this hub process has accepted, so that each launch works once.

    ltiauthenticator 1.6.3 keeps no server-side record: its nonce is the hash of a value in
    an encrypted browser cookie, so whoever captured the callback request *with* its cookies
    can send it again until the id_token expires. A nonce is kept until its launch could no
    longer pass the validator anyway (``exp``, or ``iat`` + max_age), then forgotten; at most
    ``capacity`` are kept, and when they are all still live new launches wait (503) rather
    than an old nonce being dropped early. The record lives in memory, so a launch issued
    before this process started is refused: a restart cannot turn a used launch into a new one.
    """

    def __init__(self, capacity: int, clock: Callable[[], float] = time.time):
        self.capacity = capacity
        self.clock = clock
        self.started_at = clock()
        self._deadlines: dict[str, float] = {}
        self._by_deadline: list[tuple[float, str]] = []  # heap: the next nonce to forget first

    def __len__(self) -> int:
        return len(self._deadlines)

    def _forget_expired(self, now: float) -> None:
        while self._by_deadline and self._by_deadline[0][0] < now:
            _, nonce = heapq.heappop(self._by_deadline)
            del self._deadlines[nonce]

    def spend(self, nonce: str, issued_at: float, deadline: float) -> None:
        """Record ``nonce`` as used until ``deadline``, or raise the HTTPError that refuses the launch."""
        # iat counts whole seconds: a launch issued in the second the process started is
        # let in, or one made right after a fast start would be refused
        if issued_at < math.floor(self.started_at):
            raise HTTPError(403, "This launch was issued before the hub last started, so the hub cannot tell "
                                 "whether it was already used. Please go back to your course in the LMS and "
                                 "launch again.")
        self._forget_expired(self.clock())
        if nonce in self._deadlines:
            raise HTTPError(403, "This launch has already been used: each launch from the LMS works once. "
                                 "Please go back to your course in the LMS and open the tool again.")
        if len(self._deadlines) >= self.capacity:
            raise HTTPError(503, "The hub is receiving more launches than it can check right now. Please wait "
                                 "a minute, then launch again from your course in the LMS.")
        self._deadlines[nonce] = deadline
        heapq.heappush(self._by_deadline, (deadline, nonce))


class CourseLTI13LoginInitHandler(CrossSiteCookies, LTI13LoginInitHandler):
    """Upstream's login initiation, its cookies cross-site over HTTPS (lti_presentation.py); a launch
    started inside a frame when the tool opens in a window of its own gets the page with the link to do so."""

    def post(self):
        if self.authenticator.presentation == WINDOW and framed(self.request.headers):
            args = {name: values[-1].decode("utf-8", "replace") for name, values in self.request.arguments.items()}
            here = f"{self.authenticator.get_uri_scheme(self.request)}://{self.request.host}{self.request.path}"
            self.set_header("Content-Security-Policy", NEW_WINDOW_PAGE_POLICY)
            self.finish(new_window_page(url_concat(here, args)))
            return
        super().post()

    get = post


class CourseLTI13CallbackHandler(CrossSiteCookies, LTI13CallbackHandler):
    """The launch (id_token) handler of ltiauthenticator 1.6.3, step for step, plus the
    checks that make a launch one of *this* course.

    Upstream never looks at deployment_id or the context, so any course of the LMS that
    installs the tool could launch into ours; and it checks issuer and audience inside
    ``jwt.decode``, where a mismatch becomes a bare 400/401. Expiry, age and LTI claims stay
    with its validator; issuer, audience, deployment and context are decided by
    ``CourseLTI13Authenticator.launch_refusal`` so that a 403 says which. The signature is
    checked against a key from ``lti_keys.PlatformKeys`` (fetched without blocking the hub,
    kept by kid), where upstream fetched the whole key set, blocking, at every launch."""

    async def post(self):
        """Upstream's launch handler, awaiting the launch's checks (the key set is fetched asynchronously)."""
        try:
            id_token = await self.decode_and_validate_launch_request()
        except InvalidAudienceError as error:
            raise HTTPError(401, str(error))
        except ValidationError as error:
            raise HTTPError(400, str(error))
        deep_linking = is_deep_linking_request(id_token)
        if deep_linking and INSTRUCTOR not in course_roles(id_token.get(ROLES_CLAIM), self.authenticator.role_groups):
            raise HTTPError(403, "Only the course's instructors can add its assignments to the LMS: your role in "
                                 "this LMS course is not Instructor.")
        try:
            user = await self.login_user(id_token)
        except LoginError as error:
            raise HTTPError(400, str(error))
        if user is None:
            raise HTTPError(403, "User missing or null")
        if deep_linking:
            key = self.authenticator.deep_link_requests.add(user.name, id_token, next(iter(_audiences(id_token))))
            self.redirect(url_path_join(self.hub.base_url, self.authenticator.deep_link_url(""), key))
            return
        await self.redirect_to_next_url(user)

    async def decode_and_validate_launch_request(self) -> dict[str, Any]:
        validator = LTI13LaunchValidator(parent=self.app)
        args = convert_request_to_dict(self.request.arguments)
        validator.validate_auth_response(args)
        self.check_state()
        id_token = await self.verified_claims(args.get("id_token"), validator.time_leeway)
        if is_deep_linking_request(id_token):
            problem = deep_linking_problem(id_token)
            if problem:
                raise HTTPError(400, f"This request to add an assignment from the LMS cannot be answered: {problem}.")
        else:
            validator.validate_id_token(id_token)
        refusal = self.authenticator.launch_refusal(id_token)
        if refusal:
            self.log.warning("LTI launch refused: %s", refusal)
            raise HTTPError(403, refusal)
        self.check_nonce(id_token)  # upstream: the nonce belongs to this browser's login
        deadline = min(id_token["exp"], id_token["iat"] + validator.max_age) + validator.time_leeway
        self.authenticator.spent_nonces.spend(id_token["nonce"], id_token["iat"], deadline)
        return id_token

    async def verified_claims(self, encoded: str, leeway: float) -> dict[str, Any]:
        """The id_token's claims once its signature is checked against the platform's key (as
        upstream's validator does, with the key from the cache); issuer and audience are not
        checked here but in ``launch_refusal``, which says which does not match."""
        try:
            kid = jwt.get_unverified_header(encoded).get("kid")
        except jwt.PyJWTError as error:
            raise TokenError(str(error))
        try:
            key = await self.authenticator.platform_keys.signing_key(kid)
        except UnknownKey as why:
            raise TokenError(f"Signature verification failed: {why}") from None
        except KeySetUnavailable as why:
            self.log.warning("LTI launch: the platform's key set is unavailable: %s", why)
            raise HTTPError(503, "The hub could not get your LMS's signing keys to check this launch. Please "
                                 "wait a minute, then open the tool again from your course in the LMS.") from None
        try:
            return jwt.decode(encoded, key.key, algorithms=self.authenticator.jwks_algorithms, leeway=leeway,
                              options={"verify_iss": False, "verify_aud": False,
                                       "require": ["iss", "aud", "exp", "iat", "nonce"]})
        except jwt.PyJWTError as error:
            raise TokenError(str(error))


class CourseLTI13Authenticator(LTI13Authenticator):
    """LTI13Authenticator that admits launches of this course only and puts the user in its groups."""

    login_handler = CourseLTI13LoginInitHandler
    callback_handler = CourseLTI13CallbackHandler
    config_handler = ToolConfigurationHandler

    deployment_ids = Set(
        Unicode(),
        help="deployment_id values of this tool's deployment(s) in the LMS whose launches are accepted; "
             "a launch from any other deployment is refused. Empty: every launch is refused.",
    ).tag(config=True)
    context_ids = Set(
        Unicode(),
        help="LMS course (context) ids whose launches are accepted; a launch from another course, or naming "
             "no course, is refused. '*' accepts any course of the accepted deployments (only safe when each "
             "of those deployments is installed in this one course). Empty: every launch is refused.",
    ).tag(config=True)

    launch_nonce_capacity = Integer(
        10000,
        help="How many accepted launches (their nonces) are remembered at once to refuse replays. A nonce is "
             "kept at most the id_token's lifetime (exp, or iat + 600 s); when all are still live, further "
             "launches are answered 503 until some expire.",
    ).tag(config=True)

    reserved_usernames = Set(
        Unicode(), default_value=set(RESERVED_USERNAMES),
        help="User names an LTI launch may never take (besides hub admins and this machine's system accounts).",
    ).tag(config=True)

    role_groups = Dict(
        value_trait=List(Unicode()),
        help="Full LTI role URI (e.g. http://purl.imsglobal.org/vocab/lis/v2/membership#Learner) → JupyterHub "
             "groups. Roles are compared as whole strings; a launch with none of these roles is refused.",
    ).tag(config=True)
    allow_unmapped_roles = Bool(
        False, help="Let a launch whose roles map to no group log in (with no group).").tag(config=True)

    unix_account_names = Bool(
        False,
        help="Hub users run as Unix accounts of the same name (the native hub as root). A username claim "
             "that is not already such a name (accounts.NAME_PATTERN: a Canvas UUID, a Moodle number, an "
             "e-mail, capitals) becomes lti-<hash of issuer and claim>, the same at every launch.",
    ).tag(config=True)
    lms_ids_file = Unicode(
        "",
        help="JSON file (the hub's alone) where each name made from an LMS id is kept with that id "
             "(issuer, claim, value). Empty: kept only in the hub's log.",
    ).tag(config=True)

    presentation = Unicode(
        WINDOW,
        help="How the LMS shows the tool: 'window' (a window of its own; a launch started inside a frame gets a "
             "link that opens it in one) or 'embed' (inside the LMS's page; see configure_lti and "
             "lti_presentation.py).",
    ).tag(config=True)

    service_scopes = List(
        Unicode(),
        help="OAuth scopes of the LMS services this hub calls (AGS, NRPS), the only ones its configuration "
             "(/hub/lti13/config) asks the LMS for. Empty: it calls none and asks for none.",
    ).tag(config=True)

    launch_services_file = Unicode(
        "", help="JSON file where the line items URL and scopes a launch's endpoint claim names are kept for the "
                 "LMS sync (lms/launch_services.py). Empty: not kept.",
    ).tag(config=True)
    service_origins = List(
        Unicode(), help="Origins (scheme://host:port) of the LMS's site: a line items URL a launch names "
                        "elsewhere is not kept.",
    ).tag(config=True)

    outbound_dir = Unicode(
        "", help="The exchange's outbound folder of the course: its assignment folders are the released "
                 "assignments an instructor may add to the LMS (deep linking).",
    ).tag(config=True)
    instructors_group = Unicode(
        help="The hub group of the course's instructors: only its members may add assignments to the LMS.",
    ).tag(config=True)

    tool_key_file = Unicode(
        "",
        help="PEM file of the tool's own RSA key (lti_tool_keys.py), made on the hub's first start, readable by "
             "the hub's account alone; its public key set is served at /hub/lti13/jwks. Empty: no key, no key set.",
    ).tag(config=True)

    jwks_timeout = Float(
        5.0, help="Seconds to wait for the platform's key set (JWKS) before the launch is answered 503.",
    ).tag(config=True)
    jwks_refetch_interval = Float(
        30.0,
        help="Least seconds between two fetches of the key set caused by a key id it did not list "
             "(a platform's new key is found at once, a stream of made-up key ids costs one fetch per interval).",
    ).tag(config=True)
    jwks_max_age = Float(
        3600.0, help="Seconds the fetched key set is trusted before it is fetched again (a key the platform "
                     "withdrew stops working within this time).",
    ).tag(config=True)

    @default("role_groups")
    def _role_groups_default(self):
        return default_role_groups()

    @default("instructors_group")
    def _instructors_group_default(self):
        return f"instructors-{course_id()}"

    @default("username_key")
    def _username_key_default(self):
        # the stable id the LMS assigns; upstream's "email" is user-editable (module docstring, Name)
        return "sub"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.spent_nonces = SpentNonces(self.launch_nonce_capacity)
        self._platform_keys: PlatformKeys | None = None
        self._lms_ids: LmsIdTable | None = None
        self._tool_key: ToolKey | None = None
        self.deep_link_requests = PendingRequests()

    @property
    def tool_key(self) -> ToolKey:
        if self._tool_key is None:
            if not self.tool_key_file:
                raise RuntimeError("CourseLTI13Authenticator.tool_key_file is not set")
            self._tool_key = ToolKey.load_or_create(self.tool_key_file)
        return self._tool_key

    def get_handlers(self, app):
        handlers = super().get_handlers(app)
        if self.tool_key_file:
            self.tool_key  # made or checked at start-up: a key file that cannot be trusted stops the hub
            handlers.append((self.tool_key_set_url(""), ToolKeySetHandler))
            handlers.append((self.deep_link_url("") + r"/([A-Za-z0-9_-]+)", DeepLinkPickerHandler))
        return handlers

    def deep_link_url(self, base_url: str) -> str:
        return url_path_join(base_url, "lti13", "deep_link")

    def tool_key_set_url(self, base_url: str) -> str:
        return url_path_join(base_url, "lti13", "jwks")

    @property
    def platform_keys(self) -> PlatformKeys:
        if self._platform_keys is None:
            self._platform_keys = PlatformKeys(self.jwks_endpoint, timeout=self.jwks_timeout,
                                               refetch_interval=self.jwks_refetch_interval, max_age=self.jwks_max_age)
        return self._platform_keys

    def hub_name(self, claim: Any, issuer: Any) -> str:
        """The hub user name for a launch's username claim (ValueError saying why there is none)."""
        if not self.unix_account_names:
            return clean_username(claim)
        if isinstance(claim, str) and accounts.NAME_PATTERN.fullmatch(claim) \
                and not claim.startswith(MAPPED_NAME_PREFIX):
            return claim
        if not isinstance(claim, str) or not 0 < len(claim) <= LMS_ID_MAX:
            raise ValueError(f"an LMS user id is a text of 1 to {LMS_ID_MAX} characters")
        return unix_account_name(str(issuer), claim)

    def launch_refusal(self, token: dict[str, Any]) -> str | None:
        """Why a signed launch is not one for this course (issuer, client id, deployment,
        context), as a sentence for the person launching; None when it is."""
        again = " Please open the tool from this course's own page in your LMS; if that is what you did, " \
                "tell your instructor."
        issuer = token.get("iss")
        if not self.issuer or issuer != self.issuer:
            return f"This launch was signed by the platform issuer {_shown(issuer)}, which this hub does not " \
                   f"accept launches from.{again}"
        audiences = _audiences(token)
        if not audiences or any(not isinstance(aud, str) or aud not in self.client_id for aud in audiences):
            return f"This launch was issued for the LMS tool(s) with client id {_shown(audiences or ['none'])}; " \
                   f"this hub accepts launches issued for its own tool only.{again}"
        if ("azp" in token or len(audiences) > 1) and token.get("azp") not in self.client_id:
            return f"This launch was authorised for the LMS tool with client id {_shown(token.get('azp'))}, " \
                   f"not for this hub's tool.{again}"
        deployment = token.get(DEPLOYMENT_CLAIM)
        if not isinstance(deployment, str) or deployment not in self.deployment_ids:
            return f"This launch comes from deployment {_shown(deployment)} of the tool in your LMS, which " \
                   f"does not serve this course.{again}"
        context = token.get(CONTEXT_CLAIM)
        if not isinstance(context, dict) or not isinstance(context.get("id"), str) or not context["id"]:
            return f"This launch names no LMS course (no context id), and this hub serves one course only.{again}"
        if ANY_CONTEXT not in self.context_ids and context["id"] not in self.context_ids:
            title = context.get("title") or context.get("label") or context["id"]
            return f"This launch comes from the LMS course {_shown(title)} (context id {_shown(context['id'])}), " \
                   f"which is not the course this hub serves.{again}"
        return None

    def username_refusal(self, name: str, handler=None) -> str | None:
        """Why the clean user name ``name`` may not log in through the LMS; None when it may.

        An LTI launch must never land in a hub admin's account (configured, or made admin at
        run time: ``handler`` finds those in the hub's database), nor in a system account."""
        final = self.normalize_username(name)  # what JupyterHub will look up
        admins = {self.normalize_username(admin) for admin in self.admin_users}
        user = handler.find_user(final) if handler is not None else None
        if final in admins or (user is not None and user.admin):
            return f"The name {final!r} that your LMS sends for you belongs to an administrator of this hub, " \
                   "and administrators cannot sign in through the LMS. Please ask your instructor."
        if final in self.reserved_usernames or is_system_account(final) or (
                self.unix_account_names and accounts.name_problem(final) is not None):
            return f"The name {final!r} that your LMS sends for you is reserved for the system on this hub. " \
                   "Please ask your instructor."
        return None

    async def authenticate(self, handler, data: dict[str, Any] | None = None):
        model = await super().authenticate(handler, data)
        token = data or {}
        roles = token.get(ROLES_CLAIM) or []
        groups = groups_for_roles(roles, self.role_groups)
        if not groups and not self.allow_unmapped_roles:
            self.log.warning("LTI launch of %r refused: roles %s map to no course group", model["name"], roles)
            raise HTTPError(403, "Your roles in this LMS course (" + _shown(roles or ["none"]) + ") give no access "
                            "to this course's hub: it is open to the course's students, teaching assistants and "
                            "instructors. If you are one of them, please ask your instructor to check your role "
                            "in the LMS.")
        try:
            name = self.hub_name(model["name"], token.get("iss"))
        except ValueError as why:
            self.log.warning("LTI launch refused: username claim %r: %s", model["name"], why)
            raise HTTPError(403, f"The name {_shown(repr(model['name']), 80)} that your LMS sends for you is not a "
                                 f"valid user name on this hub: {why}. Please ask your instructor.") from None
        refusal = self.username_refusal(name, handler)
        if refusal:
            self.log.warning("LTI launch refused: %s", refusal)
            raise HTTPError(403, refusal)
        if name != model["name"]:
            lms_id = {"issuer": str(token.get("iss")), "claim": self.username_key, "id": model["name"]}
            self.log.info("LTI user %s is %s", name, lms_id)
            if self.lms_ids_file:
                if self._lms_ids is None:
                    self._lms_ids = LmsIdTable(self.lms_ids_file)
                self._lms_ids.record(name, lms_id)
        self.keep_launch_services(token)
        context = token.get(CONTEXT_CLAIM) or {}
        self.log.info("LTI launch: %s (roles %s, context %s) -> groups %s", name,
                      sorted(course_roles(roles, self.role_groups)), context.get("label") or context.get("id"),
                      groups)
        model.update(name=name, groups=groups, admin=False)  # admin=False: JupyterHub would otherwise ask admin_users
        return model


    def keep_launch_services(self, token: dict[str, Any]) -> None:
        """Keep the line items URL of an accepted launch for the LMS sync; never fails the launch."""
        if not self.launch_services_file:
            return
        try:
            found = launch_services.from_launch(token, tuple(self.service_origins))
            if found is not None and launch_services.record(self.launch_services_file, found):
                self.log.info("LTI: the course's line items are at %s (scopes %s)", found.line_items_url,
                              ", ".join(found.scopes) or "none")
        except launch_services.UnusableEndpoint as why:
            self.log.warning("LTI launch: its grade service endpoint is not used: %s", why)
        except OSError as why:
            self.log.warning("LTI launch: the line items URL could not be kept in %s: %s",
                             self.launch_services_file, why)


def _required(configured: Settings, name: str) -> str:
    value = getattr(configured, name.lower()).strip()
    if not value:
        raise SystemExit(f"HUB_AUTHENTICATOR=lti needs {name} (see attention_platform/hub/lti.py)")
    return value


def _required_list(configured: Settings, name: str) -> list[str]:
    items = list(getattr(configured, name.lower()))
    if not items:
        raise SystemExit(f"HUB_AUTHENTICATOR=lti needs {name} (see attention_platform/hub/lti.py)")
    return items


def configure_lti(c, environ: dict | None = None) -> None:
    """Configure JupyterHub (config object ``c``) for LTI 1.3 launches from the environment."""
    env = settings() if environ is None else Settings.from_environ(environ)
    c.JupyterHub.authenticator_class = CourseLTI13Authenticator
    auth = c.CourseLTI13Authenticator
    auth.issuer = _required(env, "LTI_ISSUER")
    auth.client_id = set(_required_list(env, "LTI_CLIENT_ID"))
    auth.authorize_url = _required(env, "LTI_AUTHORIZE_URL")
    auth.jwks_endpoint = _required(env, "LTI_JWKS_URL")
    auth.deployment_ids = set(_required_list(env, "LTI_DEPLOYMENT_IDS"))
    auth.context_ids = set(_required_list(env, "LTI_CONTEXT_IDS"))
    auth.username_key = env.lti_username_key.strip() or "sub"
    auth.uri_scheme = env.lti_uri_scheme
    auth.tool_name = env.lti_tool_name
    auth.tool_description = "Autograded self-attention assignment (nbgrader)"
    if env.lti_role_groups.strip():
        auth.role_groups = parse_role_groups(env.lti_role_groups)
    else:
        auth.role_groups = default_role_groups(env.nbgrader_course_id)
    auth.instructors_group = f"instructors-{env.nbgrader_course_id}"
    auth.allow_unmapped_roles = env.lti_allow_unmapped_roles
    auth.tool_key_file = env.lti_tool_key_file or str(Path(env.hub_state_dir) / "lti-tool-key.pem")
    auth.presentation = env.lti_presentation
    # the line items URL may come from launches, so the grade services are asked for whenever services are on
    auth.service_scopes = scopes_for(env.lti_token_url, env.lti_line_items_url or env.lti_token_url,
                                     env.lti_memberships_url)
    if env.lti_token_url:
        auth.launch_services_file = str(launch_services.kept_file(env))
        auth.service_origins = list(launch_services.course_site_origins(env))
    if env.lti_presentation == EMBED:
        try:
            origins = embed_origins(env.lti_embed_origins)
        except ValueError as why:
            raise SystemExit(str(why)) from None
        policy = frame_ancestors_policy(origins)
        c.JupyterHub.tornado_settings.update({"headers": {"Content-Security-Policy": policy},
                                              "cookie_options": cross_site_cookie_options(env.lti_uri_scheme)})
        # the students' servers read these (jupyter_config/student/jupyter_server_config.py)
        c.Spawner.environment.update({"LTI_PRESENTATION": EMBED, "LTI_EMBED_ORIGINS": ",".join(origins),
                                      "LTI_URI_SCHEME": env.lti_uri_scheme})
    # who may enter is decided by the LMS (a valid signed launch) and the role mapping above
    auth.allow_all = True
    auth.manage_groups = True
    c.Authenticator.manage_groups = True
    c.Authenticator.allow_all = True
