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


def token_expiry(token: str) -> int | None:
    """The `exp` claim of a token (not verified), or None when it cannot be read."""
    try:
        payload = token.split(".")[1]
        padded = payload + "=" * (-len(payload) % 4)
        exp = json.loads(base64.urlsafe_b64decode(padded)).get("exp")
    except (IndexError, ValueError, AttributeError):
        return None
    return exp if isinstance(exp, int) else None
