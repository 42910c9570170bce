"""An OBO file's header and the release date it declares (``data-version``, else ``date:``),
read without the stanzas; ``OboFormatError`` names the file and line of a malformed file.
"""
from __future__ import annotations

import calendar
import re
from datetime import date
from pathlib import Path

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import numbered_lines


# tags whose value is a reference: keep the first token (drop trailing "{...}" and "! comment")
_DATA_VERSION = re.compile(r"(\d{4})-(\d{2})(?:-(\d{2}))?")
_HEADER_DATE = re.compile(r"^(\d{1,2}):(\d{1,2}):(\d{4})")


class OboFormatError(TempoInputError):
    """The OBO file is malformed; the message names the file and the line."""


def _date_from_data_version(value: str) -> date | None:
    match = _DATA_VERSION.search(value)
    if not match:
        return None
    year, month = int(match.group(1)), int(match.group(2))
    if not 1 <= month <= 12:
        return None
    if match.group(3) is None:
        # a month-only release ("releases/2014-01") is dated to that month's last day
        return date(year, month, calendar.monthrange(year, month)[1])
    try:
        return date(year, month, int(match.group(3)))
    except ValueError:
        return None


def _date_from_header_date(value: str) -> date | None:
    match = _HEADER_DATE.match(value.strip())
    if not match:
        return None
    day, month, year = (int(part) for part in match.groups())
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _read_header(path: str | Path) -> dict[str, str]:
    """First value of each tag before the first stanza."""
    header: dict[str, str] = {}
    for _number, raw in numbered_lines(path):
        line = raw.strip()
        if line.startswith("["):
            break
        if not line or line.startswith("!"):
            continue
        tag, sep, value = line.partition(": ")
        if sep:
            header.setdefault(tag, value.strip())
    return header


def _header_date(header: dict[str, str]) -> date | None:
    found = None
    if "data-version" in header:
        found = _date_from_data_version(header["data-version"])
    if found is None and "date" in header:
        found = _date_from_header_date(header["date"])
    return found


def obo_file_date(path: str | Path) -> date | None:
    """The release date an OBO file declares in its header (the stanzas are not read).

    ``data-version: releases/2019-01-27`` -> 2019-01-27; ``data-version: releases/2014-01`` ->
    the last day of that month; otherwise ``date: 27:10:2014 12:00`` -> 2014-10-27; else None.
    """
    return _header_date(_read_header(path))
