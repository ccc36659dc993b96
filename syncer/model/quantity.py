"""Kubernetes resource quantities (k8s.io/apimachinery/pkg/api/resource), exactly: "500m", "16Gi", "1.5",
"2e3", "100n". Values in the units kube-scheduler compares (NodeResourcesFit): CPU in millicores, every
other resource in its whole units (bytes for memory, devices for nvidia.com/gpu), rounded up as
`Quantity.MilliValue()` and `Quantity.Value()` round."""

from __future__ import annotations

import math
import re
from fractions import Fraction

_NUMBER = re.compile(r"([+-]?)([0-9]*\.?[0-9]*)(.*)", re.DOTALL)
# Kubernetes' suffixes: decimal SI (k = 10^3 ... E = 10^18, and the fractions n, u, m) and binary
# (Ki = 2^10 ... Ei = 2^60)
_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    **{prefix: Fraction(1000**power) for power, prefix in enumerate("kMGTPE", start=1)},
    **{prefix + "i": Fraction(1024**power) for power, prefix in enumerate("KMGTPE", start=1)},
}
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")
CPU = "cpu"


class QuantityError(ValueError):
    """Not a Kubernetes quantity; the message quotes it."""


def parse_quantity(text: object) -> Fraction:
    """The exact value of a quantity as the API server serves it (a string; a JSON number is accepted)."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise QuantityError(f"quantity {text!r} is not a string")
    raw = str(text).strip()
    match = _NUMBER.fullmatch(raw)
    if match is None or match.group(2) in ("", "."):
        raise QuantityError(f"quantity {raw!r}: expected a number such as 500m, 2 or 16Gi")
    sign, digits, suffix = match.groups()
    number = Fraction(digits)  # "5." and ".5" read as Go's parser reads them
    if suffix in _SUFFIXES:
        value = number * _SUFFIXES[suffix]
    elif (exponent := _EXPONENT.match(suffix)) is not None:
        value = number * Fraction(10) ** int(exponent.group(1))
    else:
        raise QuantityError(f"quantity {raw!r}: unknown suffix {suffix!r}")
    return -value if sign == "-" else value


def scheduler_units(resource: str, text: object) -> int:
    """The value kube-scheduler compares: millicores for cpu, whole units (rounded up) for the rest."""
    value = parse_quantity(text)
    return math.ceil(value * 1000) if resource == CPU else math.ceil(value)
