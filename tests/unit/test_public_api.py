"""The names users import from the package's top level resolve, whatever folder holds them."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest

import django_advisory_cron

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("name", django_advisory_cron.__all__)
def test_every_public_name_resolves(name: str) -> None:
    value = getattr(django_advisory_cron, name)
    assert value is not None
    if isinstance(value, ModuleType):  # control: what operators say, of the ops layer
        assert value.__name__ == "django_advisory_cron.ops.control"
    assert name in dir(django_advisory_cron)


def test_the_docs_import_only_public_top_level_names() -> None:
    imported = set()
    for page in DOCS.glob("*.md"):
        for names in re.findall(r"from django_advisory_cron import ([\w, ]+)", page.read_text()):
            imported |= {name.strip() for name in names.split(",") if name.strip()}
    assert imported, "the docs show no import from the package"
    assert sorted(imported - set(django_advisory_cron.__all__)) == []


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'lockconn'"):
        django_advisory_cron.lockconn  # noqa: B018 - the old module path is gone
