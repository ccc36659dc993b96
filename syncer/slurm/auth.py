"""Where the client's Slurm token comes from: static, a rotating file, minted from the JWT key, or none."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Protocol

from syncer.slurm.errors import SlurmAuthError
from syncer.slurm.jwt import mint_token, token_expiry, token_problem


class TokenSource(Protocol):
    def headers(self) -> dict[str, str]:
        """Headers that authenticate one request (empty for no-token auth)."""
        ...

    def invalidate(self) -> None:
        """The server rejected the token: re-read or re-mint before the next request."""
        ...

    def expiry(self) -> tuple[float, str] | None:
        """The `exp` of the token in use (Unix seconds) and the source's kind, or None without one."""
        ...

    def problem(self) -> str:
        """What is visibly wrong with the credential (expired, another user's), "" when nothing."""
        ...


def missing(path: Path, exc: OSError) -> str:
    """Why a credential file cannot be read, and the fix: a mounted Secret names its files by its keys."""
    if isinstance(exc, FileNotFoundError) and path.parent.is_dir():
        return (
            f"{path}: no such file: the Secret mounted at {path.parent} is missing or has no key "
            f"{path.name!r}; create it with that key (kubectl create secret generic NAME "
            f"--from-file={path.name}=...) or name the key it has (chart: slurm.auth.secretKey)"
        )
    return f"{path}: {exc.strerror}; check the Secret and its mount"


def _token_headers(token: str, user: str | None) -> dict[str, str]:
    headers = {"X-SLURM-USER-TOKEN": token}
    if user:
        headers["X-SLURM-USER-NAME"] = user
    return headers


class NoToken:
    """rest_auth/local over a unix socket: slurmrestd trusts the socket's peer credentials."""

    def headers(self) -> dict[str, str]:
        return {}

    def invalidate(self) -> None:
        return None

    def expiry(self) -> tuple[float, str] | None:
        return None

    def problem(self) -> str:
        return ""

    def __repr__(self) -> str:
        return "NoToken()"


class StaticToken:
    def __init__(self, token: str, user: str | None = None) -> None:
        if not token.strip():
            raise SlurmAuthError("the Slurm token is empty: pass a token, a token file or a JWT key")
        self._token = token.strip()
        self._user = user

    def headers(self) -> dict[str, str]:
        return _token_headers(self._token, self._user)

    def invalidate(self) -> None:
        return None

    def expiry(self) -> tuple[float, str] | None:
        exp = token_expiry(self._token)
        return None if exp is None else (float(exp), "static")

    def problem(self) -> str:
        return token_problem(self._token, self._user)

    def __repr__(self) -> str:
        return "StaticToken(<redacted>)"


class TokenFile:
    """A token in a file (a mounted Kubernetes Secret): re-read when the file changes or is rejected."""

    def __init__(self, path: Path, user: str | None = None) -> None:
        self._path = path
        self._user = user
        self._stamp: tuple[int, int, int] | None = None
        self._token = ""

    def _read(self) -> None:
        try:
            stat = os.stat(self._path)
            stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
            if stamp == self._stamp and self._token:
                return
            token = self._path.read_text().strip()
        except OSError as exc:
            raise SlurmAuthError(f"cannot read the Slurm token file {missing(self._path, exc)}") from exc
        if not token:
            raise SlurmAuthError(f"the Slurm token file {self._path} is empty; check the Secret")
        self._token, self._stamp = token, stamp

    def headers(self) -> dict[str, str]:
        self._read()
        return _token_headers(self._token, self._user)

    def invalidate(self) -> None:
        self._stamp = None

    def expiry(self) -> tuple[float, str] | None:
        try:
            self._read()  # the file as it is now: a rotated Secret shows its new token's expiry
        except SlurmAuthError:
            return None
        exp = token_expiry(self._token)
        return None if exp is None else (float(exp), "file")

    def problem(self) -> str:
        try:
            self._read()
        except SlurmAuthError as exc:
            return str(exc)
        found = token_problem(self._token, self._user)
        return f"the token in {self._path}: {found}" if found else ""

    def __repr__(self) -> str:
        return f"TokenFile({self._path})"


class JwtKeyToken:
    """Mints short-lived HS256 tokens from Slurm's JWT key and renews them before they expire."""

    def __init__(self, key_path: Path, user: str = "slurm", lifespan_s: int = 1800) -> None:
        if lifespan_s < 60:
            raise SlurmAuthError(f"token lifetime must be at least 60 s, got {lifespan_s}")
        self._key_path = key_path
        self._user = user
        self._lifespan = lifespan_s
        self._token = ""
        self._expires = 0.0

    def headers(self) -> dict[str, str]:
        now = time.time()
        # Renew when a fifth of the lifetime is left, so a slow request never carries a dying token.
        if not self._token or now > self._expires - self._lifespan / 5:
            try:
                key = self._key_path.read_bytes()
            except OSError as exc:
                raise SlurmAuthError(f"cannot read the Slurm JWT key {missing(self._key_path, exc)}") from exc
            self._token = mint_token(key, self._user, self._lifespan, now)
            self._expires = float(token_expiry(self._token) or now + self._lifespan)
        return _token_headers(self._token, None)

    def invalidate(self) -> None:
        self._token = ""

    def expiry(self) -> tuple[float, str] | None:
        # renewed before it runs out: kind "jwt_key" tells alerts not to count down to this one
        return (self._expires, "jwt_key") if self._token else None

    def problem(self) -> str:
        return ""  # minted here for its user, fresh: what slurmrestd says is all there is

    def __repr__(self) -> str:
        return f"JwtKeyToken({self._key_path}, user={self._user})"


EXPIRY_WARN_S = 7 * 86400  # as the SlurmSyncerSlurmTokenExpiring alert


def expiry_check(token: TokenSource, now: float) -> list[tuple[bool, str, str, bool]]:
    """`check`'s line on the token's `exp` as (ok, what, fix, warn): fails once past, warns within 7 days;
    none for a minted token (renewed before it runs out) or one without `exp`."""
    expiry = token.expiry()
    if expiry is None or expiry[1] == "jwt_key":
        return []
    left = expiry[0] - now
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(expiry[0]))
    fix = (
        "put a fresh token in the Secret (scontrol token username=USER lifespan=SECONDS), or let the "
        "syncer mint its own from the JWT key (--slurm-jwt-key-file)"
    )
    if left <= 0:
        return [(False, f"the Slurm token expired at {when}, {-left / 3600:.1f} hours ago", fix, False)]
    if left < EXPIRY_WARN_S:
        return [(True, f"the Slurm token expires at {when}, in {left / 3600:.1f} hours", fix, True)]
    return [(True, f"the Slurm token expires at {when}, in {left / 86400:.0f} days", "", False)]
