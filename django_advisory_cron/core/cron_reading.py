"""How cron reads an expression's text where croniter reads it otherwise, so that a schedule
ticks as cron would: the expression handed to croniter, and its ``day_or``.

The two day fields follow Vixie cron's rule (Debian's cron, and most others): when the day of
month or the weekday field starts with ``*`` (``*``, ``*/2``), a day must match both; when both
are restricted otherwise, a day matches either. ``"0 0 */2 * 1"`` is an odd-numbered Monday,
``"0 0 1-31/2 * 1"`` an odd-numbered day or a Monday. (croniter's own default, which
django-q2 uses, matches either in both.)

A range of one value is that value: cron reads ``5-5`` as 5, croniter as the whole field.
"""

from __future__ import annotations

import functools
import re

from croniter import croniter

#: The ``@`` forms of a cron expression, as the five fields they stand for (for those that
#: read the fields: the describer, a monitor's schedule).
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

#: A range of one value, ``5-5`` or ``mon-mon`` (with a step or not).
_ONE_VALUE = re.compile(r"(\w+)-(\w+)(/\d+)?")


def one_value_ranges(expression: str) -> str:
    """``expression`` with each range of one value written as that value: ``0 5-5 * * *`` is
    ``0 5 * * *``. cron reads ``5-5`` as 5; croniter reads it as the whole field (every hour),
    and ``5-5/2`` as ``*/2``."""

    def one(item: str) -> str:
        match = _ONE_VALUE.fullmatch(item)
        if match is None:
            return item
        first, last = match[1].lower(), match[2].lower()
        same = first == last or (first.isdigit() and last.isdigit() and int(first) == int(last))
        return match[1] if same else item

    return " ".join(",".join(map(one, part.split(","))) for part in expression.split(" "))


@functools.lru_cache(maxsize=1024)
def _every_day(expression: str) -> tuple[bool, bool]:
    """Whether croniter expands the day of month, and the weekday, of a five- or six-field
    ``expression`` to every day (``*``)."""
    expanded = croniter(expression).expanded
    return expanded[2][0] == "*", expanded[4][0] == "*"


@functools.lru_cache(maxsize=1024)
def day_reading(expression: str) -> tuple[str, bool]:
    """The expression to hand croniter, and its ``day_or``, for cron's reading of the day
    fields (see the module docstring).

    croniter's own test looks at the expanded fields, which it sometimes widens to ``*``
    (``0-6`` beside ``*/2``), not at what was written; its ``implement_cron_bug`` reads that
    too. So the rule is applied here: a field written with ``*`` (or croniter's ``?``) makes
    the days match both; otherwise either, and a field naming every day then matches every day.
    """
    fields = expression.split()
    if len(fields) < 5:
        return expression, False  # an alias (@daily): at most one day field is restricted
    every_day = _every_day(expression)
    if fields[2][0] in "*?" or fields[4][0] in "*?" or all(every_day):
        return expression, False
    if not any(every_day):
        return expression, True
    return " ".join([*fields[:2], "*", fields[3], "*", *fields[5:]]), False


def days_unlike_croniter(expression: str) -> bool:
    """Whether croniter's default reading of ``expression``'s day fields (django-q2's) differs
    from cron's: it matches either day field whenever both expand to fewer than every day, so
    ``"0 0 */2 * 1"`` is an odd-numbered day or a Monday there."""
    if len(expression.split()) < 5:
        return False
    croniter_or = not any(_every_day(expression))
    written, day_or = day_reading(expression)
    if day_or != croniter_or:
        return True
    # The same rule, on fields that may be spelled apart but name the same days (a day of
    # month listing every day beside a weekday range that names every day, "1,*/1" and "0-6",
    # is every day both ways).
    return written != expression and _spans(written) != _spans(expression)


def croniters_days_in_cron(expression: str) -> str | None:
    """``expression`` with its day fields written so that cron reads them as croniter's default
    (django-q2's) does, or ``None`` when no such writing is found: a field croniter expands to
    every day becomes ``*``; when both are restricted, a leading ``*`` becomes the field's
    range (``*/2`` is ``1-31/2``), so that a day matches either."""
    fields = expression.split()
    if len(fields) < 5:
        return expression
    every_day = _every_day(expression)
    for index, span, every in ((2, "1-31", every_day[0]), (4, "0-6", every_day[1])):
        if every:
            fields[index] = "*"
        elif not any(every_day):
            items = fields[index].split(",")
            fields[index] = ",".join(span + item[1:] if item[0] in "*?" else item for item in items)
    written = " ".join(fields)
    if one_value_ranges(written) != written:
        return None  # croniter reads 0-0 as the whole field, which cron cannot write
    same = _spans(written) == _spans(expression)
    return written if same and not days_unlike_croniter(written) else None


#: Each field's values, for croniter's expansion (minute, hour, day of month, month, weekday,
#: second).
_FIELD_VALUES: tuple[list[object], ...] = tuple(
    list(values)
    for values in (range(60), range(24), range(1, 32), range(1, 13), range(7), range(60))
)


@functools.lru_cache(maxsize=1024)
def _spans(expression: str) -> tuple[tuple[object, ...], ...]:
    """croniter's expansion of each field of ``expression``, a field that lists every value
    read as ``*``, as croniter itself writes it for some spellings and not others (``1,*/1``
    is every day of the month, listed beside a weekday range, ``*`` beside ``*``)."""
    return tuple(
        ("*",) if list(field) == values else tuple(field)
        for field, values in zip(croniter(expression).expanded, _FIELD_VALUES, strict=False)
    )
