"""Date conversions shared by parsers, manifests and partition keys."""
from __future__ import annotations

import re
from datetime import date, datetime

_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_COMPACT = re.compile(r"^(\d{4})(\d{2})(\d{2})$")


def parse_date(value: str | date) -> date:
    """Parse ``YYYY-MM-DD`` or ``YYYYMMDD`` (a ``date`` passes through).

    Raises ``ValueError`` naming the value when it is neither.
    """
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    text = str(value).strip()
    match = _ISO.match(text) or _COMPACT.match(text)
    if not match:
        raise ValueError(f"not a date (expected YYYY-MM-DD): {value!r}")
    year, month, day = (int(part) for part in match.groups())
    return date(year, month, day)


def date_to_int(value: date) -> int:
    """``date(2019, 1, 14) -> 20190114``: the GAF column-14 representation."""
    return value.year * 10000 + value.month * 100 + value.day
