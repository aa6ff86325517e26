"""The tool's own key pair (attention_platform/hub/lti_tool_keys.py): made once, readable by the hub's
account alone, never written through a planted link; its public key set verifies what it signs."""

from __future__ import annotations

import os
import stat

import jwt
import pytest

from attention_platform.hub.lti_tool_keys import ToolKey, ToolKeyProblem


def test_the_key_is_made_once_for_the_hub_alone_and_its_key_set_verifies_what_it_signs(tmp_path):
    path = tmp_path / "lti-tool-key.pem"
    made = ToolKey.load_or_create(path)
    mode = path.stat().st_mode
    assert stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o600
    again = ToolKey.load_or_create(path)
    assert again.kid == made.kid, "the next start uses the same key"
    (public,) = again.jwks()["keys"]
    assert {"d", "p", "q", "dp", "dq", "qi"}.isdisjoint(public), "the key set holds the public half only"
    assert public["kid"] == made.kid and public["alg"] == "RS256" and public["use"] == "sig"

    token = made.sign({"iss": "tool", "aud": "https://lms.example.test"})
    assert jwt.get_unverified_header(token)["kid"] == made.kid
    key = jwt.PyJWKSet.from_dict(again.jwks())[made.kid]
    claims = jwt.decode(token, key.key, algorithms=["RS256"], audience="https://lms.example.test")
    assert claims["iss"] == "tool" and claims["exp"] > claims["iat"] and claims["jti"]
    other = ToolKey.load_or_create(tmp_path / "other.pem")
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(other.sign({"aud": "x"}), key.key, algorithms=["RS256"], audience="x")


@pytest.mark.parametrize("target_exists", [True, False])
def test_attack_a_link_planted_at_the_key_path_is_never_followed(tmp_path, target_exists):
    """Someone who can write the state directory plants a link where the key goes, hoping the hub (root,
    natively) writes a private key through it, or reads a file of theirs as the key."""
    target = tmp_path / "elsewhere"
    if target_exists:
        target.write_text("someone else's file\n")
    link = tmp_path / "lti-tool-key.pem"
    link.symlink_to(target)
    with pytest.raises(ToolKeyProblem, match="link"):
        ToolKey.load_or_create(link)
    if target_exists:
        assert target.read_text() == "someone else's file\n"
    else:
        assert not target.exists(), "nothing was created through the link"


def test_a_key_file_others_can_read_or_do_not_own_is_refused(tmp_path):
    path = tmp_path / "lti-tool-key.pem"
    ToolKey.load_or_create(path)
    path.chmod(0o640)
    with pytest.raises(ToolKeyProblem, match="chmod 600"):
        ToolKey.load_or_create(path)
    path.chmod(0o600)
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)
        with pytest.raises(ToolKeyProblem, match="owner"):
            ToolKey.load_or_create(path)
        os.chown(path, 0, 0)
    path.write_text("not a key\n")
    with pytest.raises(ToolKeyProblem, match="PEM"):
        ToolKey.load_or_create(path)
    (tmp_path / "a-directory").mkdir(mode=0o700)
    with pytest.raises(ToolKeyProblem, match="regular file"):
        ToolKey.load_or_create(tmp_path / "a-directory")
