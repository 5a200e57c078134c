"""What this app's management commands share: an epilog printed as written (exit-code
tables), leaving with one line and a documented exit code (a usage error too), refusing to
start while a system check of this app reports an error, and reading the jobs with the
database's schedules."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NoReturn

from django.core import checks
from django.core.management.base import (
    BaseCommand,
    CommandError,
    CommandParser,
    SystemCheckError,
)
from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    ProgrammingError,
    connections,
)

from .. import exitcodes
from ..conf import APP_LABEL, CHECK_TAG, check_id
from ..core.names import did_you_mean
from ..db.connections import bound_connect, read_only, refusing_writes, unavailable
from ..exceptions import (
    CommandFailed,
    DatabaseReadOnly,
    DatabaseUnavailable,
    LockDatabaseError,
    first_line,
)
from ..jobs import catalog
from ..jobs.catalog import Catalog
from ..jobs.job import registry
from .arguments import Bounded, text

#: Check ids whose errors a command reports as a usage error (exit 2), as it did before it
#: ran the checks: a job's invalid schedule.
USAGE_CHECKS = frozenset({check_id("E005"), check_id("E007"), check_id("E008")})


class UsageParser(CommandParser):
    """A parser whose usage errors, on the command line, are one line named after the command
    (and its action), with exit 2, where argparse prints the whole usage first; from
    ``call_command`` they raise, as Django's do."""

    def error(self, message: str) -> NoReturn:
        if not self.called_from_command_line:
            super().error(message)
        named = ": ".join(self.prog.split()[1:])  # "manage.py cronjob pause": cronjob: pause
        sys.stderr.write(f"{named}: {message} (see {self.prog} -h)\n")
        sys.exit(exitcodes.USAGE)


def _typed(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, Callable[[Any], Any]]]:
    """Each option of a type of [arguments][django_advisory_cron.management.arguments]: its
    dest, flag and type, the actions' (subparsers') included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _typed(sub)
        elif isinstance(action.type, Bounded) or action.type is text:
            flag = action.option_strings[-1] if action.option_strings else action.dest
            yield action.dest, flag, action.type


class AppCommand(BaseCommand):
    """A command whose ``--help`` ends with ``epilog``, kept as written, and that refuses to
    start while a system check of this app reports an error (see ``check``)."""

    epilog = ""
    #: This app's checks, before ``handle``; ``--skip-checks`` skips them. The live ones (tagged
    #: ``database``) get no database here and do nothing: ``manage.py check --database`` runs
    #: them.
    requires_system_checks = [CHECK_TAG]
    #: Each typed option's dest, flag and type (see ``execute``).
    _types: tuple[tuple[str, str, Callable[[Any], Any]], ...] = ()

    def check(
        self,
        app_configs: Any = None,
        tags: Any = None,
        display_num_errors: bool = False,
        include_deployment_checks: bool = False,
        fail_level: int = checks.ERROR,
        databases: Any = None,
    ) -> None:
        """Exit 78 (2 for an invalid schedule) when a check of this app reports an error,
        printing each error's message on a line of its own (``manage.py check`` shows them
        with their ids and hints). Warnings are left to ``manage.py check``."""
        found = checks.run_checks(
            app_configs=app_configs,
            tags=tags,
            include_deployment_checks=include_deployment_checks,
            # No database unless asked: Django 6.1 gives the database-tagged checks every alias
            # when none is named, which would probe the pooler (a second) and refuse a job
            # over another job's settings at every start.
            databases=[] if databases is None else databases,
        )
        errors = [
            message
            for message in found
            if message.level >= fail_level
            and (message.id or "").startswith(f"{APP_LABEL}.")
            and not message.is_silenced()  # SILENCED_SYSTEM_CHECKS
        ]
        if not errors:
            return
        for message in errors:
            self.stderr.write(f"{self.command_name}: {' '.join(message.msg.split())}")
        usage = all(message.id in USAGE_CHECKS for message in errors)
        sys.exit(exitcodes.USAGE if usage else exitcodes.CONFIG)

    @property
    def command_name(self) -> str:
        """The command's name, as typed after ``manage.py``."""
        return self.__module__.rpartition(".")[2]

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        if self.epilog:
            parser.formatter_class = argparse.RawDescriptionHelpFormatter
            parser.epilog = self.epilog
        # Django makes every command's parser a CommandParser: this one says a usage error in
        # one line (it only overrides ``error``).
        parser.__class__ = UsageParser
        self._types = tuple(_typed(parser))
        return parser

    def execute(self, *args: Any, **options: Any) -> Any:
        """As Django's, but on the command line a ``CommandError`` is one line named after the
        command, as ``leave`` prints it (Django would name the exception's class); with
        ``--traceback``, and for ``call_command``, it is raised as it is."""
        try:
            self._retype(options)
            return self._writes_refused(*args, **options)
        except CommandError as error:
            if (
                not getattr(self, "_called_from_command_line", False)
                or options.get("traceback")
                or isinstance(error, SystemCheckError)
            ):
                raise
            self.leave(error.returncode, str(error))

    def _writes_refused(self, *args: Any, **options: Any) -> Any:
        """Django's ``execute``; a write the database refused as read-only (an ORM write, or
        one of our statements) ends the command with one line and exit 69."""
        try:
            return super().execute(*args, **options)
        except (DatabaseError, DatabaseReadOnly) as error:
            if not read_only(error):
                raise
            refused = error if isinstance(error, DatabaseReadOnly) else refusing_writes(None)
            raise CommandFailed(
                f"{refused}; nothing was changed", exitcodes.DATABASE_UNAVAILABLE
            ) from error

    def _retype(self, options: dict[str, Any]) -> None:
        """Pass the typed options through their type again: ``call_command`` gives those passed
        by keyword as they are, past the parser (a schedule's command gets its ``kwargs``
        so). A value refused is a usage error."""
        for dest, flag, kind in self._types:
            value = options.get(dest)
            try:
                if isinstance(value, list):
                    options[dest] = [kind(item) for item in value]
                elif value is not None:
                    options[dest] = kind(value)
            except argparse.ArgumentTypeError as error:
                raise CommandFailed(f"{flag} {error}", exitcodes.USAGE) from None

    def catalog(self, alias: str) -> Catalog:
        """Every job, as the database's schedules make them (see
        [catalog][django_advisory_cron.jobs.catalog]); leaves with 69 when the database cannot
        be reached and 78 when the app's tables are missing."""
        try:
            bound_connect(alias)
        except LockDatabaseError as error:
            self.leave(exitcodes.CONFIG, str(error))
        opened = connections[alias].connection is None
        try:
            return catalog.current(alias)
        except DatabaseUnavailable as error:
            self.leave(exitcodes.DATABASE_UNAVAILABLE, str(error))
        except ProgrammingError as error:
            self.leave(
                exitcodes.CONFIG,
                f"the database refused to list the schedules ({first_line(error)}): are the "
                "app's tables missing? run manage.py migrate",
            )
        except (OperationalError, InterfaceError) as error:
            self.leave(exitcodes.DATABASE_UNAVAILABLE, str(unavailable(alias, error)))
        finally:
            if opened:
                # Opened for this one statement: a job that does not query keeps no
                # connection of Django's (a lock has its own).
                connections[alias].close()

    def leave(self, code: int, message: str) -> NoReturn:
        """Print one line to stderr, named after the command, and exit with ``code``."""
        self.stderr.write(f"{self.command_name}: {message}")
        sys.exit(code)


def no_job_named(names: list[str], otherwise: str, known: Iterable[str] | None = None) -> str:
    """``"no job named 'a'; did you mean b?"``: the line for names that no job has (``known``:
    default the registered jobs), with the close matches of the first (see
    ``did_you_mean``)."""
    known = [job.name for job in registry.all()] if known is None else list(known)
    hint = did_you_mean(names[0], known, otherwise)
    return f"no job named {', '.join(map(repr, names))}{hint}"


def cannot_run(name: str, why: str) -> str:
    """The line for a database schedule left out of the jobs (``Catalog.broken``): why, and
    what to do."""
    return (
        f"the schedule {name!r} cannot run: {why}; change it with "
        f"'manage.py cronjob edit {name}', or remove it"
    )
