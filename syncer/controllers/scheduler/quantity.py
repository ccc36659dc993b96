"""Kubernetes resource quantities, read exactly (k8s.io/apimachinery's grammar) as fractions.

`<sign><digits>[.<digits>]<suffix>`, the suffix binary (Ki .. Ei), decimal (m, "", k, M, G, T, P, E) or an
exponent (e3, E-2). Exact arithmetic, so "0.1" + "0.2" CPUs is 300 millicores and never 300.00000000000006.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Final

_BINARY: Final = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL: Final = {"m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_FORM: Final = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<exponent>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?)"
)
# Far beyond any resource (10^30 bytes is a million yottabytes) and small enough that a hostile exponent such
# as 1e999999999 cannot make a number of a billion digits.
MAX_EXPONENT: Final = 30
MILLI_RESOURCES: Final = frozenset({"cpu"})  # counted in thousandths, as kube-scheduler's MilliValue()


class BadQuantity(ValueError):
    pass


def parse(text: str) -> Fraction:
    """The exact value of a quantity; BadQuantity (saying what is wrong) when it is not one, or negative."""
    match = _FORM.fullmatch(text)
    if match is None:
        raise BadQuantity(f"{text!r} is not a Kubernetes quantity (such as 500m, 2, 1.5Gi, 4e3)")
    value = Fraction(match["number"])
    if match["exponent"] is not None:
        power = int(match["exponent"][1:])
        if abs(power) > MAX_EXPONENT:
            raise BadQuantity(f"{text!r} is out of range (exponent beyond {MAX_EXPONENT})")
        value *= Fraction(10) ** power
    elif match["suffix"] in _BINARY:
        value *= 1024 ** _BINARY[match["suffix"]]
    else:
        value *= Fraction(10) ** _DECIMAL[match["suffix"] or ""]
    if match["sign"] == "-" and value:
        raise BadQuantity(f"{text!r} is negative")
    return value


def canonical(resource: str, value: Fraction) -> int:
    """The whole number kube-scheduler compares: millicores for CPU, else the value itself; rounded up."""
    return math.ceil(value * 1000) if resource in MILLI_RESOURCES else math.ceil(value)


def amounts(resources: Mapping[str, str]) -> dict[str, int]:
    """A Node's allocatable (or any resource list) in canonical units; what does not parse counts as 0
    (the API server admits no such value: this only keeps a foreign oddity from stopping placement)."""
    result: dict[str, int] = {}
    for name, text in resources.items():
        try:
            result[name] = canonical(name, parse(text))
        except BadQuantity:
            result[name] = 0
    return result
