"""The reference pages must match the code: every setting, every exit code, the pinned keys."""

from __future__ import annotations

import re
from pathlib import Path

from django_advisory_cron import conf, exitcodes
from django_advisory_cron.core.keys import name_hash
from django_advisory_cron.management.commands import runlocked

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_every_setting_is_documented_with_its_default() -> None:
    page = (DOCS / "settings.md").read_text()
    for key, default in conf.DEFAULTS.items():
        assert f"### `{key}` {{#{key.lower()}}}" in page, key
        row = next(line for line in page.splitlines() if line.startswith(f"| [`{key}`]"))
        shown = "`None`" if default is None else f"`{default!r}`".replace("'", '"')
        assert shown in row, (key, row)


def test_every_runlocked_exit_code_is_in_the_usage_table() -> None:
    page = (DOCS / "usage.md").read_text()
    table = set(re.findall(r"^\| (\d+|N) \|", page, flags=re.MULTILINE))
    used = set(re.findall(r"exitcodes\.([A-Z_]+)", Path(runlocked.__file__).read_text()))
    codes = {str(getattr(exitcodes, name)) for name in used} | {"0", "N"}
    epilog = set(re.findall(r"^\s+(\d+|N)\s", runlocked.EPILOG, flags=re.MULTILINE))
    epilog |= set(re.findall(r"(\d+) by SIG", runlocked.EPILOG))
    assert codes <= table
    assert table == epilog


def test_key_examples_are_the_real_values() -> None:
    page = (DOCS / "keys.md").read_text()
    assert f"**{conf.DEFAULT_NAMESPACE}**" in page
    quoted = (
        re.escape('name_hash("send_daily_digest")') + rf"\s+# {name_hash('send_daily_digest')}\b"
    )
    assert re.search(quoted, page)
    assert f"# {name_hash('clearsessions')}" in page
