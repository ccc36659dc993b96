import base64
import hashlib
import hmac
import json
import os
from pathlib import Path

import pytest

from syncer.slurm.auth import JwtKeyToken, NoToken, StaticToken, TokenFile
from syncer.slurm.errors import SlurmAuthError
from syncer.slurm.jwt import mint_token, token_expiry, token_problem


def test_minted_token_is_hs256_signed_with_the_claims_slurm_reads() -> None:
    token = mint_token(b"k" * 32, "slurm", 600, now=1_000)
    header, payload, signature = token.split(".")
    expected = hmac.new(b"k" * 32, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    assert base64.urlsafe_b64decode(signature + "==") == expected
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    assert claims == {"exp": 1_600, "iat": 1_000, "sun": "slurm"}
    assert token_expiry(token) == 1_600
    assert token_expiry("garbage") is None


def test_token_file_is_reread_when_the_secret_rotates(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("first\n")
    source = TokenFile(path)
    assert source.headers()["X-SLURM-USER-TOKEN"] == "first"
    path.write_text("second-and-longer\n")
    os.utime(path, ns=(1, 2))
    assert source.headers()["X-SLURM-USER-TOKEN"] == "second-and-longer"


def test_token_file_errors_name_the_file_not_the_token(tmp_path: Path) -> None:
    missing = TokenFile(tmp_path / "absent")
    with pytest.raises(SlurmAuthError, match="absent"):
        missing.headers()
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(SlurmAuthError, match="is empty"):
        TokenFile(empty).headers()


def test_jwt_key_token_renews_after_invalidate(tmp_path: Path) -> None:
    key = tmp_path / "jwt.key"
    key.write_bytes(b"z" * 32)
    source = JwtKeyToken(key, user="slurm", lifespan_s=600)
    first = source.headers()["X-SLURM-USER-TOKEN"]
    assert source.headers()["X-SLURM-USER-TOKEN"] == first  # cached while fresh
    expiry = token_expiry(first)
    assert expiry is not None
    source.invalidate()
    assert token_expiry(source.headers()["X-SLURM-USER-TOKEN"]) is not None


def test_reprs_never_show_secrets(tmp_path: Path) -> None:
    assert "secret" not in repr(StaticToken("secret"))
    assert NoToken().headers() == {}
    with pytest.raises(SlurmAuthError, match="empty"):
        StaticToken("  ")


def test_each_token_source_reports_the_expiry_of_the_token_it_sends(tmp_path: Path) -> None:
    key = b"k" * 32
    assert StaticToken(mint_token(key, "slurm", 600, now=1_000)).expiry() == (1_600.0, "static")
    assert StaticToken("not-a-jwt").expiry() is None  # nothing to count down to
    assert NoToken().expiry() is None
    path = tmp_path / "token"
    source = TokenFile(path)
    assert source.expiry() is None  # the file is missing: no figure, and no crash at scrape time
    path.write_text(mint_token(key, "slurm", 600, now=1_000) + "\n")
    assert source.expiry() == (1_600.0, "file")
    path.write_text(mint_token(key, "slurm", 86_400, now=2_000) + "\n")  # the Secret rotated
    os.utime(path, ns=(1, 2))
    assert source.expiry() == (88_400.0, "file")
    (tmp_path / "key").write_bytes(key)
    minted = JwtKeyToken(tmp_path / "key", lifespan_s=600)
    assert minted.expiry() is None  # nothing minted yet
    sent = minted.headers()["X-SLURM-USER-TOKEN"]
    assert minted.expiry() == (float(token_expiry(sent) or 0), "jwt_key")


def test_token_problems_are_named_without_the_key(tmp_path: Path) -> None:
    key, now = b"k" * 32, 1_800_000_000
    assert token_problem(mint_token(key, "slurm", 3600, now), "slurm", now) == ""
    expired = token_problem(mint_token(key, "slurm", 60, now - 7200), "slurm", now)
    assert expired == "it expired at 2027-01-15T06:01:00Z, 2.0 h ago"
    other = token_problem(mint_token(key, "alice", 3600, now), "slurm", now)
    assert "issued for user 'alice' (its sun claim) but the requests name 'slurm'" in other
    assert token_problem("not-a-jwt", "slurm", now).startswith("it is not a JWT")
    missing = TokenFile(tmp_path / "token", user="slurm").problem()
    assert f"the Secret mounted at {tmp_path} is missing or has no key 'token'" in missing
