"""The unit tier: tests of the pure parts, with no server and no subprocess (see
tests/unit/pytest.ini)."""

from tests.registries import fresh_registry  # noqa: F401  (a fixture of tests/registries.py)
