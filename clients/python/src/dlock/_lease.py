"""Durations, the client-side deadline of a lease, and the retry backoff.

The deadline rule is the C++ client's (docs/client.md "Client deadlines", ADR-0012): a lease
whose request was *sent* at ``sent_at`` (monotonic seconds) is trusted until

    sent_at + trusted - ceil(trusted * clock_drift)        (milliseconds)
    trusted = min(TTL asked, TTL answered)                 (the answered one when none was asked)

so the client stops believing in a lock no later than the server expires it, even when the
server answers more than was asked or its clock runs up to clock_drift / (1 - clock_drift)
faster than ours.
"""

from __future__ import annotations

import datetime
import math
import os
import re

#: The clock-rate allowance when neither the option nor DLOCK_CLOCK_DRIFT sets one (1 %).
DEFAULT_CLOCK_DRIFT = 0.01

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def duration_ms(value: object, field: str = "duration") -> int:
    """Whole milliseconds of ``"500ms"``, ``"10s"``, ``"5m"``, ``"1h"``, a number of seconds or
    a ``timedelta``. ``None`` is 0. Raises ``InvalidArgument`` naming ``field`` otherwise."""
    from .errors import InvalidArgument

    if value is None:
        return 0
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool):
        raise InvalidArgument(f"{field}: not a duration: {value!r}", field=field)
    elif isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise InvalidArgument(
                f"{field}: not a duration: {value!r} (e.g. 500ms, 10s, 5m, 1h)", field=field
            )
        return int(round(float(match.group(1)) * _UNIT_MS[match.group(2)]))
    else:
        raise InvalidArgument(f"{field}: not a duration: {value!r}", field=field)
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidArgument(f"{field}: not a non-negative duration: {value!r}", field=field)
    return int(round(seconds * 1000))


def parse_clock_drift(text: str, field: str = "clock_drift") -> float:
    """``"0.01"`` or ``"1%"``: a fraction in [0, 0.5)."""
    from .errors import InvalidArgument

    number = text.strip()
    percent = number.endswith("%")
    try:
        value = float(number[:-1] if percent else number)
    except ValueError:
        value = -1.0
    if percent:
        value /= 100
    if not 0 <= value < 0.5:
        raise InvalidArgument(
            f"{field}: {text!r} is not a clock-rate allowance in [0, 0.5), e.g. 0.01 or 1%",
            field=field,
        )
    return value


def resolve_clock_drift(option: float | None) -> float:
    """The option, else DLOCK_CLOCK_DRIFT, else DEFAULT_CLOCK_DRIFT."""
    from .errors import InvalidArgument

    if option is not None:
        if not 0 <= option < 0.5:
            raise InvalidArgument(
                "clock_drift: the clock-rate allowance must be a fraction in [0, 0.5), e.g. 0.01",
                field="clock_drift",
            )
        return float(option)
    env = os.environ.get("DLOCK_CLOCK_DRIFT", "")
    return parse_clock_drift(env, "DLOCK_CLOCK_DRIFT") if env else DEFAULT_CLOCK_DRIFT


def trusted_ttl_ms(asked_ms: int, answered_ms: int) -> int:
    """The TTL a lease is trusted for: a server answering more than was asked never lengthens
    the client's trust. ``asked_ms`` 0: the server's default was asked for, so the answer."""
    if asked_ms <= 0:
        return answered_ms
    if answered_ms <= 0:
        return asked_ms
    return min(asked_ms, answered_ms)


def lease_deadline(sent_at: float, ttl_ms: int, clock_drift: float) -> float:
    """Monotonic time until which a lease of ``ttl_ms`` sent at ``sent_at`` is believed."""
    allowance_ms = math.ceil(ttl_ms * clock_drift)
    return sent_at + (ttl_ms - allowance_ms) / 1000.0


def backoff_delay(initial_s: float, max_s: float, attempt: int, random_fraction: float) -> float:
    """Delay before retry ``attempt`` (0 = the first): with d = min(max, initial * 2^attempt),
    a value in [d/2, d]. The random half keeps clients that failed together from retrying in
    lock-step; the fixed half keeps the delay from collapsing to zero."""
    full = min(max_s, initial_s * (2 ** min(attempt, 30)))
    return full / 2 + (full / 2) * random_fraction
