"""Which HTTP proxy a request goes through, from the environment, as client-go chooses it (Go's
golang.org/x/net/http/httpproxy): HTTPS_PROXY for https URLs, HTTP_PROXY for http ones (upper case
first), nothing for localhost and loopback addresses, and nothing for hosts NO_PROXY names: `*`, an IP, a
CIDR (`10.96.0.0/12`: Python's own `proxy_bypass` knows no CIDRs, which clusters put there for the service
network), a domain (`example.com` matches it and its subdomains, `.example.com` only the subdomains), each
optionally with a port."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from urllib.parse import urlsplit


def _env(env: Mapping[str, str], name: str) -> str:
    return env.get(name.upper()) or env.get(name.lower()) or ""


def proxy_for(url: str, env: Mapping[str, str] | None = None) -> str | None:
    """The proxy URL for requests to `url`, or None to connect directly."""
    env = os.environ if env is None else env
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    proxy = _env(env, "https_proxy" if parts.scheme == "https" else "http_proxy")
    if not proxy or not _uses_proxy(
        parts.hostname, parts.port or (443 if parts.scheme == "https" else 80), env
    ):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _uses_proxy(host: str, port: int, env: Mapping[str, str]) -> bool:
    host = host.lower().rstrip(".")
    if host == "localhost":
        return False
    address = _ip(host)
    if address is not None and address.is_loopback:
        return False
    for raw in _env(env, "no_proxy").split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return False
        if "/" in entry:
            try:
                if address is not None and address in ipaddress.ip_network(entry, strict=False):
                    return False
            except ValueError:
                pass  # not a CIDR: Go ignores it too
            continue
        name, wanted_port = _split_port(entry)
        if wanted_port is not None and wanted_port != port:
            continue
        named = _ip(name)
        if named is not None:
            if address is not None and named == address:
                return False
            continue
        name = name.removeprefix("*")
        if name.startswith("."):
            if host.endswith(name):
                return False
        elif host == name or host.endswith("." + name):
            return False
    return True


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None


def _split_port(entry: str) -> tuple[str, int | None]:
    """`host:port`, `[v6]:port`, a bare IPv6 address or a bare host."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return host, int(port) if port.isdigit() else None
    return entry, None
