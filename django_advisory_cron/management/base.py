"""What this app's management commands share: an epilog printed as written (exit-code
tables), and leaving with one line and a documented exit code."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterable
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandParser


class AppCommand(BaseCommand):
    """A command whose ``--help`` ends with ``epilog``, kept as written."""

    epilog = ""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        parser.epilog = self.epilog
        return parser

    def leave(self, code: int, message: str) -> NoReturn:
        """Print one line to stderr, named after the command, and exit with ``code``."""
        self.stderr.write(f"{self.__module__.rpartition('.')[2]}: {message}")
        sys.exit(code)


def did_you_mean(name: str, candidates: Iterable[str], otherwise: str) -> str:
    """``"; did you mean a, b?"`` with up to three close matches of ``name``, else
    ``"; " + otherwise`` (what to do to see the names)."""
    close = difflib.get_close_matches(name, list(candidates), n=3)
    return f"; did you mean {', '.join(close)}?" if close else f"; {otherwise}"
