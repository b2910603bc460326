"""The listener with the clients BI tools and notebooks bring: TLS with verify-full, the JDBC
driver DBeaver and Metabase use (with their metadata calls), node-postgres, and SQLAlchemy with
``pandas.read_sql``.

The JDBC driver, psql and node-postgres are installed by ``make clients`` (part of ``make
test``); here a missing one is a skip, unless ``DALENIUS_REQUIRE_ORACLES`` is set (``make test``
sets it), when it is a failure.
"""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import psycopg
import pytest
from tests.server.pgwire_helpers import Wire, require_client, running_wire

from dalenius.core.loss import PureDP
from dalenius.server.pgwire.listener import WireSettings

CLIENTS = Path(__file__).parent / "clients"
JDBC_JAR = Path("/usr/share/java/postgresql.jar")


@pytest.fixture
def wire(demo_catalog: Path) -> Iterator[Wire]:
    with running_wire(demo_catalog) as made:
        yield made


@pytest.fixture
def tls_wire(demo_catalog: Path, tmp_path: Path) -> Iterator[tuple[Wire, Path]]:
    trustme = pytest.importorskip("trustme")
    authority = trustme.CA()
    server = authority.issue_cert("localhost", "127.0.0.1")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.configure_cert(context)
    root = tmp_path / "root.pem"
    authority.cert_pem.write_to_path(str(root))
    with running_wire(demo_catalog, WireSettings(ssl_context=context)) as made:
        yield made, root


def test_tls_with_verify_full_signs_in_with_the_token_inside_tls(
    tls_wire: tuple[Wire, Path],
) -> None:
    wire, root = tls_wire
    dsn = wire.dsn(sslmode="verify-full", sslrootcert=str(root), host="localhost")
    with psycopg.connect(**dsn, autocommit=True) as conn:
        assert conn.pgconn.ssl_in_use
        conn.execute("SET dalenius.epsilon = 0.1")
        assert len(conn.execute("SELECT COUNT(*) FROM people").fetchall()) == 1
    assert wire.remaining() == PureDP(Fraction(9, 10))


def test_a_token_without_a_scram_verifier_signs_in_over_tls_only(
    tls_wire: tuple[Wire, Path],
) -> None:
    wire, root = tls_wire
    # A token issued before the listener existed has no verifier: only its hash is stored.
    with wire.site.gateway.store.backend.transaction(write=True) as tx:
        tx.run("DELETE FROM dalenius_gateway_scram")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(**wire.dsn(sslmode="disable"))
    dsn = wire.dsn(sslmode="verify-full", sslrootcert=str(root), host="localhost")
    with psycopg.connect(**dsn) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("alice",)


def test_psql_verify_full(tls_wire: tuple[Wire, Path]) -> None:
    psql = shutil.which("psql")
    require_client(psql is not None, "psql (Debian's postgresql-client)")
    wire, root = tls_wire
    env = dict(os.environ, PGPASSWORD=wire.site.analyst, PGSSLMODE="verify-full",
               PGSSLROOTCERT=str(root))  # fmt: skip
    shown = subprocess.run(
        [str(psql), "-h", "localhost", "-p", str(wire.port), "-U", "alice", "-d", "census",
         "-c", r"\conninfo", "-c", r"\dt"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert "SSL connection" in shown.stdout, shown.stderr
    assert "people" in shown.stdout


def test_the_jdbc_driver_browses_the_schema_and_asks(wire: Wire) -> None:
    java = shutil.which("java")
    require_client(java is not None and JDBC_JAR.exists(), "Java and the PostgreSQL JDBC driver")
    url = f"jdbc:postgresql://127.0.0.1:{wire.port}/census"
    ran = subprocess.run(
        [str(java), "-cp", str(JDBC_JAR), str(CLIENTS / "WireClient.java"), url, "alice",
         wire.site.analyst],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    lines = ran.stdout.splitlines()
    assert "product PostgreSQL 16.0" in lines, ran.stderr
    assert {"table people", "table visits"} <= set(lines)
    assert "column age int8" in lines and "column married bool" in lines
    # Schemas (public, pg_catalog, information_schema), one catalog, no keys nor indexes.
    assert "browse 3 1 0 0 0" in lines
    rows = [line.split() for line in lines if line.startswith("row ")]
    assert sorted(r[1] for r in rows) == ["Female", "Male"]
    for _, _, n, low, high in rows:
        assert int(low) <= int(n) <= int(high)
    assert any(line.startswith("notice dalenius: spent ε = 0.1") for line in lines)
    assert any(line.startswith("refused 42601") for line in lines)
    assert wire.remaining() == PureDP(Fraction(9, 10))


def test_node_postgres_sends_untyped_parameters_and_reads_a_refusal(wire: Wire) -> None:
    node = shutil.which("node")
    require_client(node is not None and (CLIENTS / "node_modules" / "pg").exists(), "node-postgres")
    ran = subprocess.run(
        [str(node), str(CLIENTS / "wire_client.js"), str(wire.port), "alice", wire.site.analyst],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    lines = ran.stdout.splitlines()
    rows = [line.split() for line in lines if line.startswith("row ")]
    assert sorted(r[1] for r in rows) == ["Female", "Male"], ran.stderr
    refused = next(line for line in lines if line.startswith("refused "))
    sql = "SELECT COUNT(*) FROM people WHERE agee > 3"
    assert refused.startswith(f"refused 42601 {sql.index('agee') + 1} did you mean 'age'")
    assert wire.remaining() == PureDP(Fraction(9, 10))


def test_sqlalchemy_inspects_and_pandas_reads_a_private_answer(wire: Wire) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    pandas = pytest.importorskip("pandas")
    url = sqlalchemy.URL.create(
        "postgresql+psycopg",
        username="alice",
        password=wire.site.analyst,
        host="127.0.0.1",
        port=wire.port,
        database="census",
    )
    engine = sqlalchemy.create_engine(
        url, connect_args={"sslmode": "disable", "options": "-c dalenius.epsilon=0.2"}
    )
    try:
        inspector = sqlalchemy.inspect(engine)
        assert inspector.get_table_names() == ["people", "visits"]
        columns = {c["name"]: str(c["type"]) for c in inspector.get_columns("people")}
        assert columns["age"] == "BIGINT" and columns["married"] == "BOOLEAN"
        frame = pandas.read_sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex", engine)
    finally:
        engine.dispose()
    assert list(frame.columns) == ["sex", "n", "n_low", "n_high"]
    assert ((frame.n_low <= frame.n) & (frame.n <= frame.n_high)).all()
    assert wire.remaining() == PureDP(Fraction(4, 5))
