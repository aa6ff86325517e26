"""The tool's own signing key (LTI 1.3): what the hub signs for the LMS, and its public key set.

LTI Advantage has the tool sign what it sends the platform: a deep-linking response, and the JWT
assertion of a service-token request (AGS, NRPS). The private key lives in one PEM file that only the
hub's account can read (mode 0600), made on the hub's first start with ``O_EXCL | O_NOFOLLOW`` so a
link planted at its path is never followed nor written through; an existing file is used only when it
is a regular file of the hub's own account that no one else can read or write. The public half is
served as a JWKS at ``/hub/lti13/jwks`` (``ToolKeySetHandler``), the URL an LMS is given as the tool's
key-set URL; its key id is the key's RFC 7638 thumbprint, so it changes only with the key.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import time
import uuid
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jupyterhub.handlers import BaseHandler
from jwt.algorithms import RSAAlgorithm

KEY_BITS = 2048
KEY_FILE_MAX_BYTES = 64 * 1024


class ToolKeyProblem(Exception):
    """The key file exists but cannot be trusted or read; the message says why and what to do."""


def _thumbprint(public_jwk: dict[str, Any]) -> str:
    canonical = json.dumps({name: public_jwk[name] for name in ("e", "kty", "n")}, separators=(",", ":"),
                           sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).decode().rstrip("=")


class ToolKey:
    """The tool's RSA key pair, read from (or first written to) ``path``."""

    def __init__(self, private_key: rsa.RSAPrivateKey):
        self.private_key = private_key
        public = json.loads(RSAAlgorithm.to_jwk(private_key.public_key()))
        self.kid = _thumbprint(public)
        self.public_jwk = {**public, "kid": self.kid, "alg": "RS256", "use": "sig"}

    @classmethod
    def load_or_create(cls, path: str | os.PathLike) -> "ToolKey":
        path = Path(path)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            return cls(_read_private_key(path))
        key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        with os.fdopen(descriptor, "wb") as out:
            out.write(pem)
        return cls(key)

    def jwks(self) -> dict[str, list[dict[str, Any]]]:
        return {"keys": [self.public_jwk]}

    def sign(self, claims: dict[str, Any], *, lifetime: int = 300) -> str:
        """``claims`` as an RS256 JWT with this key's kid, issued now, expiring after ``lifetime`` seconds,
        with a fresh ``jti`` unless the claims carry one."""
        now = int(time.time())
        body = {"iat": now, "exp": now + lifetime, "jti": uuid.uuid4().hex, **claims}
        return jwt.encode(body, self.private_key, algorithm="RS256", headers={"kid": self.kid})


def _read_private_key(path: Path) -> rsa.RSAPrivateKey:
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as error:  # ELOOP: a symbolic link
        raise ToolKeyProblem(f"{path}: the LTI tool key cannot be opened ({error.strerror}); it must be a "
                             "regular file, not a link") from None
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode):
        os.close(descriptor)
        raise ToolKeyProblem(f"{path}: the LTI tool key must be a regular file")
    with os.fdopen(descriptor, "rb") as source:
        if info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise ToolKeyProblem(f"{path}: the LTI tool key must belong to the hub's account and be readable by "
                                 f"it alone (chmod 600); it has mode {stat.S_IMODE(info.st_mode):o} and owner "
                                 f"uid {info.st_uid}. Replace it, or delete it to make a new key (then give the "
                                 "LMS the new key set, or let it fetch /hub/lti13/jwks again)")
        pem = source.read(KEY_FILE_MAX_BYTES + 1)
    if len(pem) > KEY_FILE_MAX_BYTES:
        raise ToolKeyProblem(f"{path}: not an LTI tool key (over {KEY_FILE_MAX_BYTES} bytes)")
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as error:
        raise ToolKeyProblem(f"{path}: not an unencrypted PEM private key ({error})") from None
    if not isinstance(key, rsa.RSAPrivateKey) or key.key_size < KEY_BITS:
        raise ToolKeyProblem(f"{path}: the LTI tool key must be an RSA key of at least {KEY_BITS} bits")
    return key


class ToolKeySetHandler(BaseHandler):
    """``GET /hub/lti13/jwks``: the tool's public key set, for the LMS to check what the tool signs."""

    def get(self):
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "public, max-age=300")
        self.write(json.dumps(self.authenticator.tool_key.jwks()))
