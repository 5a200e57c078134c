"""The kinds of value this app's commands take, one argparse ``type`` each: a number of seconds,
a count, a text. Each reads the command line's text (and checks a value ``call_command`` passes
as it is, see [base][django_advisory_cron.management.base]) into a value inside its bounds, or
raises ``ArgumentTypeError`` with one line saying what it must be: never a value that fails
later (a wait of nan, a limit past the database's integers, a name the database cannot store).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

N = TypeVar("N", int, float)

#: The longest a value is quoted in a refusal.
SHOWN = 40


def shown(value: object) -> str:
    """``value`` as a refusal quotes it: short, on one line."""
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= SHOWN else f"{text[: SHOWN - 3]}..."


def number(value: object) -> float:
    """``value`` (a text, or a number given as one) as a finite number; ``ValueError`` else."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(value)
    found = float(value)
    if not math.isfinite(found):
        raise ValueError(value)
    return found


@dataclass(frozen=True)
class Bounded(Generic[N]):
    """A number from ``least`` to ``most``, of the kind ``read`` reads."""

    least: N
    most: N
    #: What it must be, as its refusal says.
    kind: ClassVar[str]

    @property
    def bounds(self) -> str:
        """The bounds, as ``--help`` says them."""
        return f"{self.least} to {self.most}"

    def read(self, value: object) -> N | None:
        """``value`` as this kind of number, or ``None``."""
        raise NotImplementedError

    def __call__(self, value: object) -> N:
        found = self.read(value)
        if found is None or not self.least <= found <= self.most:
            raise argparse.ArgumentTypeError(
                f"must be {self.kind} from {self.bounds}, not {shown(value)}"
            )
        return found


class Seconds(Bounded[float]):
    """A number of seconds from ``least`` to ``most``."""

    kind = "a number of seconds"

    def read(self, value: object) -> float | None:
        try:
            return number(value)
        except (ValueError, OverflowError):
            return None


class Count(Bounded[int]):
    """A whole number from ``least`` to ``most``."""

    kind = "a whole number"

    def read(self, value: object) -> int | None:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:  # not a whole number, or more than 4300 digits
                return None
        return None


def text(value: object) -> str:
    """A name or a text the database stores: UTF-8 (a byte the command line could not decode
    arrives as a surrogate) and no NUL character."""
    if not isinstance(value, str):
        raise argparse.ArgumentTypeError(f"must be text, not {shown(value)}")
    if "\x00" in value or any("\ud800" <= character <= "\udfff" for character in value):
        raise argparse.ArgumentTypeError(
            f"must be UTF-8 text without NUL characters, not {shown(value)}"
        )
    return value


#: ``runlocked --wait`` and ``cronworker --grace``: up to a day.
WAIT = Seconds(0, 86400)
#: ``runlocked --conflict-exit-code``: what an exit status can be.
EXIT_STATUS = Count(0, 255)
#: ``cronworker --max-concurrency``.
CONCURRENCY = Count(1, 1000)
#: ``cronstatus --expect-workers``.
WORKERS = Count(0, 1000)
#: ``cronjob history --limit``.
LIMIT = Count(1, 10_000)
#: A schedule's version number (``cronjob revert``).
VERSION = Count(1, 2_147_483_647)
#: ``prune_jobruns --days``: up to a hundred years.
DAYS = Count(1, 36_500)
#: ``prune_jobruns --batch-size``.
BATCH = Count(1, 100_000)
