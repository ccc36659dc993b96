"""Bearer tokens that change while the syncer runs: a token file (projected service-account tokens are
rotated in place) and client-go exec credential plugins
(kubelogin, aws eks get-token, gke-gcloud-auth-plugin).

Each source is asked before every request and answers from its cache; `forget()` after a 401 makes the next
request read or run again, as client-go does.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import structlog

from syncer.kube.errors import config_error

log = structlog.get_logger("syncer.kube")
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
TOKEN_FILE_PERIOD_S = 60.0  # client-go re-reads a token file at most once a minute
EXEC_TIMEOUT_S = 60.0


class TokenSource(Protocol):
    async def token(self) -> str | None: ...

    def forget(self) -> None: ...


class StaticToken:
    def __init__(self, value: str) -> None:
        self._value = value

    async def token(self) -> str | None:
        return self._value

    def forget(self) -> None:
        """A fixed token cannot be refreshed."""


class TokenFile:
    """Re-read at most every `period_s`; a file that cannot be read keeps the last good token."""

    def __init__(self, path: Path, period_s: float = TOKEN_FILE_PERIOD_S) -> None:
        self.path = path
        self.period_s = period_s
        self._value: str | None = None
        self._read_at = float("-inf")

    async def token(self) -> str | None:
        if time.monotonic() - self._read_at >= self.period_s:
            self._read_at = time.monotonic()
            try:
                value = self.path.read_text().strip()
                problem = "" if value else "it is empty"
            except OSError as exc:
                value, problem = "", exc.strerror or str(exc)
            if value:
                self._value = value
            elif self._value is None:
                raise config_error(f"cannot use the token file {self.path}: {problem}")
            else:
                log.warning("token file unusable, last token kept", path=str(self.path), problem=problem)
        return self._value

    def forget(self) -> None:
        self._read_at = float("-inf")


@dataclass(frozen=True)
class ExecCredential:
    token: str | None
    client_certificate: str | None  # PEM
    client_key: str | None  # PEM
    expires_at: float | None  # epoch seconds; None: until the server refuses it


class ExecPlugin:
    """A client-go exec credential plugin (the kubeconfig's `user.exec`), run without a terminal."""

    def __init__(self, spec: Mapping[str, Any], base_dir: Path, cluster: Mapping[str, Any] | None) -> None:
        command = spec.get("command")
        if not isinstance(command, str) or not command:
            raise config_error("the kubeconfig's exec plugin names no command")
        self.api_version = str(spec.get("apiVersion") or "")
        if self.api_version not in EXEC_API_VERSIONS:
            raise config_error(
                f"exec plugin {command}: apiVersion {self.api_version or '(none)'} is not supported; "
                f"use one of {', '.join(EXEC_API_VERSIONS)}"
            )
        if spec.get("interactiveMode") == "Always":
            raise config_error(f"exec plugin {command} needs a terminal (interactiveMode: Always)")
        # client-go: a relative command with a directory part is relative to the kubeconfig file
        relative = os.sep in command and not os.path.isabs(command)
        self.command = str(base_dir / command) if relative else command
        self.args = [str(a) for a in spec.get("args") or []]
        pairs = [e for e in spec.get("env") or [] if isinstance(e, dict)]
        self.env = {str(e.get("name")): str(e.get("value", "")) for e in pairs}
        self.install_hint = str(spec.get("installHint") or "").strip()
        self._cluster = dict(cluster) if cluster is not None and spec.get("provideClusterInfo") else None
        self._cached: ExecCredential | None = None
        self._lock = asyncio.Lock()

    async def credential(self) -> ExecCredential:
        async with self._lock:
            cached = self._cached
            if cached is None or (cached.expires_at is not None and time.time() >= cached.expires_at):
                self._cached = cached = await self._run()
            return cached

    async def token(self) -> str | None:
        return (await self.credential()).token

    def forget(self) -> None:
        self._cached = None

    async def _run(self) -> ExecCredential:
        spec: dict[str, Any] = {"interactive": False}
        if self._cluster is not None:
            spec["cluster"] = self._cluster
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        hint = f" ({self.install_hint})" if self.install_hint else ""
        try:
            process = await asyncio.create_subprocess_exec(
                self.command, *self.args, env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
        except OSError as exc:
            raise config_error(f"exec plugin {self.command} cannot run: {exc.strerror}{hint}") from None
        try:
            out, err = await asyncio.wait_for(process.communicate(), EXEC_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise config_error(f"exec plugin {self.command} gave nothing in {EXEC_TIMEOUT_S:.0f} s") from None
        if process.returncode != 0:
            said = err.decode(errors="replace").strip()[-400:]
            raise config_error(f"exec plugin {self.command} exited with {process.returncode}: {said}{hint}")
        return self._parse(out)

    def _parse(self, out: bytes) -> ExecCredential:
        try:
            answer = json.loads(out)
        except ValueError:
            raise config_error(f"exec plugin {self.command} printed no JSON ExecCredential") from None
        if not isinstance(answer, dict) or answer.get("kind") != "ExecCredential":
            raise config_error(f"exec plugin {self.command} printed something other than an ExecCredential")
        if answer.get("apiVersion") != self.api_version:
            raise config_error(
                f"exec plugin {self.command} answered with apiVersion {answer.get('apiVersion')}, "
                f"the kubeconfig asked for {self.api_version}"
            )
        given = answer.get("status")
        status: dict[str, Any] = given if isinstance(given, dict) else {}
        token = status.get("token") or None
        cert, key = status.get("clientCertificateData") or None, status.get("clientKeyData") or None
        if bool(cert) != bool(key):
            raise config_error(f"exec plugin {self.command} gave a certificate or key without the other")
        if token is None and cert is None:
            raise config_error(f"exec plugin {self.command} gave neither a token nor a client certificate")
        expires_at: float | None = None
        stamp = status.get("expirationTimestamp")
        if stamp:
            try:
                expires_at = datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
            except ValueError:
                raise config_error(
                    f"exec plugin {self.command} gave expirationTimestamp {stamp!r}, not an RFC 3339 time"
                ) from None
        return ExecCredential(token, cert, key, expires_at)
