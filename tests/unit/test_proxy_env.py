"""Proxy selection from the environment as client-go does it (Go's httpproxy): the cases its docs name."""

from __future__ import annotations

import pytest

from syncer.runtime.proxy import proxy_for

ENV = {"HTTPS_PROXY": "proxy.corp:3128", "HTTP_PROXY": "http://plain.corp:8080"}


@pytest.mark.parametrize(
    ("url", "no_proxy", "expected"),
    [
        ("https://kube.example.com:6443", "", "http://proxy.corp:3128"),  # no scheme: http:// assumed
        ("http://slurmrestd.slurm:6820", "", "http://plain.corp:8080"),
        ("https://localhost:6443", "", None),  # loopback is never proxied
        ("https://127.0.0.1:6443", "", None),
        ("https://[::1]:6443", "", None),
        ("https://10.96.0.1:443", "10.96.0.0/12", None),  # the service network as a CIDR
        ("https://10.112.0.1:443", "10.96.0.0/12", "http://proxy.corp:3128"),
        ("https://kube.example.com:6443", "example.com", None),  # a domain and its subdomains
        ("https://example.com:6443", "example.com", None),
        ("https://example.com:6443", ".example.com", "http://proxy.corp:3128"),  # subdomains only
        ("https://kube.example.com:6443", ".example.com", None),
        ("https://kube.example.com:6443", "*.example.com", None),
        ("https://notexample.com:6443", "example.com", "http://proxy.corp:3128"),
        (
            "https://kube.example.com:6443",
            "kube.example.com:443",
            "http://proxy.corp:3128",
        ),  # port must match
        ("https://kube.example.com:6443", "kube.example.com:6443", None),
        ("https://192.168.1.5:6443", "192.168.1.5", None),
        ("https://kube.example.com:6443", " , *", None),
        ("https://kube.example.com:6443", "not/a/cidr", "http://proxy.corp:3128"),
    ],
)
def test_proxy_choice(url: str, no_proxy: str, expected: str | None) -> None:
    assert proxy_for(url, {**ENV, "NO_PROXY": no_proxy}) == expected


def test_lower_case_variables_and_upper_case_first() -> None:
    assert proxy_for("https://k.example", {"https_proxy": "http://low:1"}) == "http://low:1"
    assert proxy_for("https://k.example", {"https_proxy": "http://low:1", "HTTPS_PROXY": "http://up:2"}) == (
        "http://up:2"
    )
    assert proxy_for("https://k.example", {"no_proxy": "k.example", "HTTPS_PROXY": "http://up:2"}) is None
    assert proxy_for("https://k.example", {}) is None
    assert proxy_for("unix:///run/slurmrestd.sock", ENV) is None
