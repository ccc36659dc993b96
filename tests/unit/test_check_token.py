"""`check`'s line about the Slurm token's expiry, for each kind of token source."""

from pathlib import Path

from syncer.app.check_cmd import Item
from syncer.slurm.auth import JwtKeyToken, NoToken, StaticToken, TokenSource, expiry_check
from syncer.slurm.jwt import mint_token

NOW = 1_800_000_000.0
KEY = b"k" * 32


def check_token_expiry(token: TokenSource, now: float) -> list[Item]:
    return [Item(*line) for line in expiry_check(token, now)]  # as check's collect() does


def token(lifespan_s: int, issued: float = NOW) -> StaticToken:
    return StaticToken(mint_token(KEY, "slurm", lifespan_s, now=issued))


def test_expired_fails_within_a_week_warns_later_is_ok() -> None:
    (expired,) = check_token_expiry(token(600, issued=NOW - 7200), NOW)
    assert not expired.ok and "expired at 2027-01-15 06:10 UTC, 1.8 hours ago" in expired.what
    assert "scontrol token" in expired.fix
    (soon,) = check_token_expiry(token(3 * 86400), NOW)
    assert soon.ok and soon.warn and soon.what.endswith("in 72.0 hours")
    (later,) = check_token_expiry(token(30 * 86400), NOW)
    assert later.ok and not later.warn and later.what.endswith("in 30 days")


def test_no_line_for_tokens_without_expiry_or_renewed_ones(tmp_path: Path) -> None:
    assert check_token_expiry(NoToken(), NOW) == []
    assert check_token_expiry(StaticToken("opaque"), NOW) == []
    (tmp_path / "key").write_bytes(KEY)
    minted = JwtKeyToken(tmp_path / "key", lifespan_s=600)
    minted.headers()
    assert check_token_expiry(minted, NOW + 10**9) == []  # renewed before use: never "expired"
