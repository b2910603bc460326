"""The PostgreSQL listener with real clients: psycopg (simple and extended protocol) and psql.

Every test checks what a client sees (values, intervals, errors with SQLSTATE, DETAIL, HINT and
position) and what the ledger recorded: a private answer charges exactly its ε, everything else
(catalog reads, explain, refusals, failed sign-ins) charges nothing.
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.server.pgwire_helpers import Wire, require_client, running_wire

from dalenius.core.loss import PureDP


@pytest.fixture
def wire(demo_catalog: Path) -> Iterator[Wire]:
    with running_wire(demo_catalog) as made:
        yield made


def _connect(wire: Wire, **extra: object) -> psycopg.Connection:
    conn = psycopg.connect(**wire.dsn(**extra), autocommit=True)
    return conn


def test_a_group_by_answers_with_intervals_and_charges_exactly_its_epsilon(wire: Wire) -> None:
    notices: list[str] = []
    with _connect(wire) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("SET dalenius.epsilon = 0.25")
        cur = conn.execute("SELECT sex, COUNT(*) AS n, AVG(age) FROM people GROUP BY sex")
        names = [c.name for c in cur.description or []]
        rows = cur.fetchall()
    assert names == ["sex", "n", "n_low", "n_high", "avg", "avg_low", "avg_high"]
    assert sorted(r[0] for r in rows) == ["Female", "Male"]
    for _, n, n_low, n_high, avg, low, high in rows:
        assert isinstance(n, int) and n_low <= n <= n_high
        assert low <= avg <= high
    assert wire.remaining() == PureDP(Fraction(3, 4))
    assert (
        len(notices) == 1 and "spent ε = 0.25" in notices[0] and "remaining ε = 0.75" in notices[0]
    )


def test_the_same_query_again_is_answered_free(wire: Wire) -> None:
    with _connect(wire) as conn:
        conn.execute("SET dalenius.epsilon = 0.1")
        first = conn.execute("SELECT COUNT(*) FROM people").fetchall()
        again = conn.execute("SELECT COUNT(*) FROM people").fetchall()
    assert first == again
    assert wire.remaining() == PureDP(Fraction(9, 10))


def test_intervals_can_be_switched_off_for_tools_that_choke_on_them(wire: Wire) -> None:
    with _connect(wire) as conn:
        conn.execute("SET dalenius.epsilon = 0.1")
        conn.execute("SET dalenius.intervals = off")
        cur = conn.execute("SELECT COUNT(*) AS n FROM people")
        assert [c.name for c in cur.description or []] == ["n"]


def test_the_bigquery_clause_sets_the_loss_in_the_text(wire: Wire) -> None:
    with _connect(wire) as conn:
        conn.execute(
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5) COUNT(*) FROM people"
        ).fetchall()
    assert wire.remaining() == PureDP(Fraction(1, 2))


def test_parameters_are_literals_never_sql(wire: Wire) -> None:
    with _connect(wire) as conn:
        conn.execute("SET dalenius.epsilon = 0.1")
        hostile = "Male' OR '1'='1"
        cur = conn.execute(
            "SELECT COUNT(*) AS n FROM people WHERE sex = %s AND age > %s", (hostile, 30)
        )
        ((n, low, high),) = cur.fetchall()
    # No person has that sex: the true count is 0, so the noisy count is small, not ~3,000.
    assert low <= n <= high and n < 200
    assert wire.remaining() == PureDP(Fraction(9, 10))


def test_prepared_statements_run_again_with_new_values(wire: Wire) -> None:
    with _connect(wire) as conn:
        conn.execute("SET dalenius.epsilon = 0.05")
        for age in (20, 40, 60):
            cur = conn.execute(
                "SELECT COUNT(*) AS n FROM people WHERE age > %s", (age,), prepare=True
            )
            assert len(cur.fetchall()) == 1
    assert wire.remaining() == PureDP(Fraction(85, 100))


def test_a_refusal_is_a_postgresql_error_with_position_and_hint_and_spends_nothing(
    wire: Wire,
) -> None:
    sql = "SELECT COUNT(*) FROM people WHERE agee > 3"
    with _connect(wire) as conn:
        conn.execute("SET dalenius.epsilon = 0.1")
        with pytest.raises(psycopg.errors.SyntaxError) as caught:
            conn.execute(sql, prepare=False)
        diag = caught.value.diag
        assert diag.sqlstate == "42601"
        assert "unknown column 'agee'" in (diag.message_primary or "")
        assert "did you mean 'age'" in (diag.message_hint or "")
        assert diag.statement_position == str(sql.index("agee") + 1)
        # The connection stays usable after an error.
        assert conn.execute("SHOW dalenius.remaining").fetchone() == ("ε = 1",)
    assert wire.remaining() == PureDP(Fraction(1))


def test_a_missing_epsilon_names_the_setting(wire: Wire) -> None:
    with _connect(wire) as conn, pytest.raises(psycopg.Error) as caught:
        conn.execute("SELECT COUNT(*) FROM people")
    assert "SET dalenius.epsilon" in (caught.value.diag.message_hint or "")


def test_over_budget_is_refused_free(wire: Wire) -> None:
    with _connect(wire) as conn:
        conn.execute("SET dalenius.epsilon = 2")
        with pytest.raises(psycopg.Error) as caught:
            conn.execute("SELECT COUNT(*) FROM people")
    assert caught.value.diag.sqlstate == "53400"
    assert wire.remaining() == PureDP(Fraction(1))


def test_explain_shows_the_cost_and_errors_free(wire: Wire) -> None:
    with _connect(wire) as conn:
        conn.execute("SET dalenius.epsilon = 0.5")
        lines = [r[0] for r in conn.execute("EXPLAIN SELECT AVG(age) FROM people").fetchall()]
    text = "\n".join(lines)
    assert "Loss if run: ε = 0.5" in text and "±" in text
    assert wire.remaining() == PureDP(Fraction(1))


def test_what_clients_send_at_connect_is_answered_from_the_catalog(wire: Wire) -> None:
    with _connect(wire) as conn:
        version = conn.execute("SELECT version()").fetchone()
        assert version is not None and version[0].startswith("PostgreSQL 16")
        assert conn.execute("SELECT current_database(), current_user").fetchone() == (
            "census",
            "alice",
        )
        assert conn.execute("SHOW standard_conforming_strings").fetchone() == ("on",)
        conn.execute("BEGIN")
        conn.execute("COMMIT")
        columns = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = 'people' ORDER BY ordinal_position"
        ).fetchall()
        assert ("age", "BIGINT") in columns and len(columns) == 12
        tables = conn.execute(
            "SELECT c.relname, c.reltuples FROM pg_catalog.pg_class c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' ORDER BY 1"
        ).fetchall()
    # Row counts are private: the catalog says "unknown" (-1), as for a table never analysed.
    assert tables == [("people", -1.0), ("visits", -1.0)]
    assert wire.remaining() == PureDP(Fraction(1))
    assert wire.site.gateway.ledger.entries(principal="alice", dataset="census") == []


def test_a_wrong_token_is_refused_and_a_stranger_sees_no_dataset(wire: Wire) -> None:
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(**wire.dsn(password="dlt_0000000000000000_" + "x" * 43))
    with pytest.raises(psycopg.OperationalError, match="No dataset named 'census'"):
        psycopg.connect(**wire.dsn(password=wire.site.stranger, user="mallory"))
    # Another analyst's token does not sign in as alice.
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(**wire.dsn(password=wire.site.stranger))


def test_multiple_statements_in_one_simple_query(wire: Wire) -> None:
    with _connect(wire) as conn:
        cur = conn.cursor()
        cur.execute(
            "SET dalenius.epsilon = 0.1; SELECT 1 AS one; SELECT COUNT(*) AS n FROM people",
            prepare=False,
        )
        # psycopg keeps the last result set; nextset() walks from the first.
        results = []
        while True:
            results.append(cur.fetchall() if cur.description else None)
            if not cur.nextset():
                break
    assert results[-1] is not None and len(results[-1][0]) == 3
    assert wire.remaining() == PureDP(Fraction(9, 10))


def test_psql_lists_the_tables_answers_and_underlines_a_refusal(wire: Wire) -> None:
    psql = shutil.which("psql")
    require_client(psql is not None, "psql (Debian's postgresql-client)")
    env = dict(os.environ, PGPASSWORD=wire.site.analyst, PGSSLMODE="prefer")

    def run(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(psql), "-h", "127.0.0.1", "-p", str(wire.port), "-U", "alice", "-d", "census",
             "-c", command],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    listed = run(r"\d")
    assert "people" in listed.stdout and "visits" in listed.stdout, listed.stderr
    described = run(r"\d people")
    assert "hours_per_week" in described.stdout and "bigint" in described.stdout
    answered = run("SET dalenius.epsilon = 0.1; SELECT sex, COUNT(*) FROM people GROUP BY sex")
    assert "count_low" in answered.stdout and "Female" in answered.stdout, answered.stderr
    assert "spent ε = 0.1" in answered.stderr
    refused = run("SELECT COUNT(*) FROM people WHERE agee > 3")
    assert "LINE 1: SELECT COUNT(*) FROM people WHERE agee > 3" in refused.stderr
    assert "HINT:" in refused.stderr and "^" in refused.stderr


def _committed(wire: Wire) -> int:
    entries = wire.site.gateway.ledger.entries(principal="alice", dataset="census")
    return sum(entry.status == "committed" for entry in entries)


def test_a_cancelled_statement_says_its_release_stays_recorded_and_answers_free_again(
    wire: Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway = wire.site.gateway
    started, gate = threading.Event(), threading.Event()
    original = gateway.query

    def held(*args: Any, **kwargs: Any) -> Any:
        started.set()
        gate.wait(timeout=120)
        return original(*args, **kwargs)

    monkeypatch.setattr(gateway, "query", held)
    with _connect(wire) as conn:
        conn.execute("SET dalenius.epsilon = 0.1")

        def cancel_once_running() -> None:
            started.wait(timeout=120)
            conn.cancel_safe()

        canceller = threading.Thread(target=cancel_once_running)
        canceller.start()
        with pytest.raises(psycopg.errors.QueryCanceled) as caught:
            conn.execute("SELECT COUNT(*) FROM people")
        canceller.join(timeout=120)
        assert "answered free" in (caught.value.diag.message_detail or "")
        gate.set()
        # The release that had started finishes, charged and recorded, in the background.
        for _ in range(600):
            if _committed(wire) == 1:
                break
            threading.Event().wait(0.1)
        assert _committed(wire) == 1
        conn.execute("SELECT COUNT(*) FROM people").fetchall()
    assert wire.remaining() == PureDP(Fraction(9, 10))


def test_keys_keep_their_type_and_an_expression_key_is_text(wire: Wire) -> None:
    with _connect(wire) as conn:
        conn.execute("SET dalenius.epsilon = 0.1")
        for prepare in (False, True):  # the simple and the extended protocol
            married = conn.execute(
                "SELECT married, COUNT(*) AS n FROM people GROUP BY married", prepare=prepare
            ).fetchall()
            assert sorted(r[0] for r in married) == [False, True]
            binned = conn.execute(
                "SELECT CASE WHEN age < 30 THEN 'young' ELSE 'older' END AS age, COUNT(*) AS n "
                "FROM people GROUP BY 1",
                prepare=prepare,
            ).fetchall()
            assert sorted(r[0] for r in binned) == ["older", "young"]


def test_a_date_parameter_is_a_date_constant(wire: Wire) -> None:
    with _connect(wire) as conn:
        conn.execute("SET dalenius.epsilon = 0.1")
        rows = conn.execute(
            "SELECT COUNT(*) AS n FROM people WHERE date_of_birth < %s",
            (datetime.date(1980, 1, 1),),
        ).fetchall()
    assert len(rows) == 1 and rows[0][1] <= rows[0][0] <= rows[0][2]


def test_me_tells_the_console_where_postgresql_clients_connect(demo_catalog: Path) -> None:
    from dataclasses import replace

    from tests.server.helpers import build_site

    from dalenius.server.config import GatewayConfig

    for config, expected in (
        (GatewayConfig(), None),
        (
            replace(GatewayConfig(), pg_host="0.0.0.0", pg_port=5999),
            {"host": "testserver", "port": 5999, "tls": False},
        ),
    ):
        site = build_site(config, demo_catalog)
        try:
            me = site.client.get("/v1/me", headers=site.as_(site.analyst)).json()
        finally:
            site.client.close()
            site.gateway.close()
        assert me.get("postgres") == expected
