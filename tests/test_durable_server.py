"""``start_postgres(config=...)``: a throwaway server with settings of the caller's choosing
(the benchmarks start one whose commits reach the disk), while the default stays fast."""

from __future__ import annotations

import psycopg

from django_advisory_cron.testing import start_postgres

SHOWN = ("fsync", "synchronous_commit", "full_page_writes")


def shown(url: str) -> dict[str, str]:
    with psycopg.connect(url, autocommit=True) as conn:
        return {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in SHOWN}  # type: ignore[index]


def test_the_default_server_trades_durability_for_speed() -> None:
    with start_postgres() as server:
        assert shown(server.url()) == dict.fromkeys(SHOWN, "off")


def test_config_sets_server_settings_over_the_defaults() -> None:
    config = dict.fromkeys(SHOWN, "on")
    with start_postgres(config={**config, "max_connections": "250"}) as server:
        assert shown(server.url()) == config
        with psycopg.connect(server.url(), autocommit=True) as conn:
            assert conn.execute("SHOW max_connections").fetchone() == ("250",)
