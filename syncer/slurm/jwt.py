"""HS256 JWTs as Slurm's auth/jwt plugin accepts them: claims exp, iat and sun (the user name)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def mint_token(key: bytes, user: str, lifespan_s: int, now: float | None = None) -> str:
    """A token for `user`, valid `lifespan_s` seconds from `now` (default: the current time)."""
    if lifespan_s <= 0:
        raise ValueError(f"token lifespan must be positive, got {lifespan_s} s")
    issued = int(time.time() if now is None else now)
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = {"exp": issued + lifespan_s, "iat": issued, "sun": user}
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    signing_input = f"{header}.{payload}".encode("ascii")
    signature = _b64url(hmac.new(key, signing_input, hashlib.sha256).digest())
    return f"{header}.{payload}.{signature}"


def token_claims(token: str) -> dict[str, object] | None:
    """A token's claims (not verified), or None when it is not a JWT."""
    try:
        payload = token.split(".")[1]
        padded = payload + "=" * (-len(payload) % 4)
        claims = json.loads(base64.urlsafe_b64decode(padded))
    except (IndexError, ValueError):
        return None
    return claims if isinstance(claims, dict) else None


def token_expiry(token: str) -> int | None:
    """The `exp` claim of a token (not verified), or None when it cannot be read."""
    exp = (token_claims(token) or {}).get("exp")
    return exp if isinstance(exp, int) else None


def token_problem(token: str, user: str | None, now: float | None = None) -> str:
    """What is wrong with a token as far as it shows without the key ("" when nothing): expired, or
    issued for another user than the one the requests name (slurmrestd refuses that unless the token's
    user is SlurmUser or root; measured on 26.05.5: HTTP 511)."""
    claims = token_claims(token)
    if claims is None:
        return "it is not a JWT (three base64url parts separated by dots)"
    problems = []
    exp, sun = claims.get("exp"), claims.get("sun")
    current = time.time() if now is None else now
    if isinstance(exp, int) and exp <= current:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(exp))
        problems.append(f"it expired at {when}, {(current - exp) / 3600:.1f} h ago")
    if user and isinstance(sun, str) and sun != user:
        problems.append(
            f"it was issued for user {sun!r} (its sun claim) but the requests name {user!r} "
            f"(--slurm-jwt-user; chart: slurm.user): set that to {sun!r}, the token's user"
        )
    return "; ".join(problems)
