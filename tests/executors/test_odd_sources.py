"""Reading is total: whatever bytes a CSV source holds, a query ends the same way.

Each odd line is put into a small file; the exact aggregates over it must equal those over a
clean file holding just the rows the rules of :mod:`dalenius.executors.csv_text` read, and the
custodian's count of skipped lines must name the line's reason. A source that is gone, unreadable
or of the wrong kind is refused before the gate, at no cost, with an audit line.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from dalenius.cli.main import main
from dalenius.core.catalog import Catalog, parse_catalog
from dalenius.core.errors import CatalogError
from dalenius.core.loss import PureDP
from dalenius.engine.profile import profile_catalog
from dalenius.engine.session import connect
from dalenius.executors import csv_text
from dalenius.executors.base import Executor
from dalenius.executors.duckdb import DuckDBExecutor

HEADER = b"age,sex,note\r\n"
ROWS = [b"30,Male,a\r\n", b"40,Female,b\r\n", b"50,Male,c\r\n", b'70,,"x,y"\r\n']
CATALOG = """
[tables.t]
source = {{ {kind} = "{file}" }}
privacy_unit = "row"
[tables.t.columns]
age = {{ type = "int", bounds = [0, 100] }}
sex = {{ type = "str", keys = ["Female", "Male"] }}
note = "str"
"""
QUERY = (
    'SELECT COUNT(*), SUM("age"), COUNT("sex"), COUNT("note"), MIN("note"), MAX("note"), '
    'SUM(LENGTH("note")) FROM "t"'
)


def crlf(*middle: bytes, prefix: bytes = b"", tail: bytes = b"") -> bytes:
    """A CRLF file with ``middle`` lines after its second row and ``tail`` at its end."""
    return prefix + HEADER + b"".join(ROWS[:2]) + b"".join(middle) + b"".join(ROWS[2:]) + tail


def lf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n")


ODD: dict[str, tuple[bytes, bytes, str | None]] = {
    # name: (odd file, the clean file of the rows it should read, the reason it is skipped)
    "CRLF file, one LF line": (crlf(tail=b"60,Female,d\n"), crlf(b"60,Female,d\r\n"), None),
    "CRLF file, LF line inside": (crlf(b"60,Female,d\n"), crlf(b"60,Female,d\r\n"), None),
    "LF file, one CRLF line": (
        lf(crlf()) + b"60,Female,d\r\n",
        crlf(b"60,Female,d\r\n"),
        None,
    ),
    "quoted line break": (crlf(b'60,Female,"d\r\ne"\r\n'), crlf(b'60,Female,"d\r\ne"\r\n'), None),
    "last line without line break": (crlf(tail=b"60,Female,d"), crlf(b"60,Female,d\r\n"), None),
    "byte-order mark": (crlf(prefix=b"\xef\xbb\xbf"), crlf(), None),
    "NUL byte": (crlf(b"60,Fe\x00male,d\r\n"), crlf(), "NUL byte"),
    "invalid UTF-8": (crlf(b"60,Fem\xffale,d\r\n"), crlf(), "invalid UTF-8"),
    "replacement character": (crlf("60,F\ufffd,d\r\n".encode()), crlf(), "invalid UTF-8"),
    # An unquoted empty last field is the empty string (a missing value), not a field cut off.
    "empty last field": (lf(crlf(b"60,Female,\r\n")), lf(crlf(b'60,Female,""\r\n')), None),
    "empty last field, CRLF": (crlf(b"60,Female,\r\n"), crlf(b'60,Female,""\r\n'), None),
    "empty last field, last line": (crlf(tail=b"60,Female,"), crlf(b'60,Female,""\r\n'), None),
    "empty last field after a quoted comma": (
        lf(crlf(b'60,"Fe,male",\r\n')),
        lf(crlf(b'60,"Fe,male",""\r\n')),
        None,
    ),
    "too many fields": (crlf(b"60,Female,d,extra\r\n"), crlf(), "too many fields"),
    "too few fields": (crlf(b"60,Female\r\n"), crlf(), "too few fields"),
    "last line cut mid-field": (crlf(tail=b"60,Fem"), crlf(), "too few fields"),
}


def write(folder: Path, name: str, data: bytes, kind: str = "csv") -> Catalog:
    (folder / f"{name}.{kind}").write_bytes(data)
    text = CATALOG.format(kind=kind, file=f"{name}.{kind}")
    return parse_catalog(text, base_dir=folder)


def answer(executor: Executor, catalog: Catalog) -> list[Any]:
    executor.prepare(catalog.tables[0])
    return [tuple(row) for row in executor.fetch(QUERY)]


Engine = Callable[[Catalog], Executor]


def duckdb_engine(catalog: Catalog) -> Executor:
    return DuckDBExecutor(catalog)


def spark_engine(catalog: Catalog) -> Executor:
    from dalenius.executors.spark import SparkExecutor

    return SparkExecutor(catalog)


@pytest.fixture(
    params=[
        pytest.param(duckdb_engine, id="duckdb"),
        pytest.param(spark_engine, id="spark", marks=pytest.mark.spark),
    ]
)
def engine(request: pytest.FixtureRequest) -> Engine:
    engine: Engine = request.param
    return engine


@pytest.mark.parametrize("case", list(ODD))
def test_an_odd_line_is_read_or_skipped_never_an_error(
    case: str, engine: Engine, tmp_path: Path
) -> None:
    odd, clean, reason = ODD[case]
    odd_catalog = write(tmp_path, "odd", odd)
    clean_catalog = write(tmp_path, "clean", clean)
    with engine(odd_catalog) as on_odd, engine(clean_catalog) as on_clean:
        assert answer(on_odd, odd_catalog) == answer(on_clean, clean_catalog)
        skipped = on_odd.skipped_rows(odd_catalog.tables[0])  # type: ignore[attr-defined]
        assert skipped == ({reason: 1} if reason else {})


def test_an_over_long_line_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(csv_text, "MAX_LINE_BYTES", 200)
    odd = write(tmp_path, "odd", crlf(b"60,Female," + b"x" * 500 + b"\r\n"))
    clean = write(tmp_path, "clean", crlf())
    with DuckDBExecutor(odd) as on_odd, DuckDBExecutor(clean) as on_clean:
        assert answer(on_odd, odd) == answer(on_clean, clean)
        assert on_odd.skipped_rows(odd.tables[0]) == {"line too long": 1}


@pytest.fixture
def adult_plus_lf(shared_data: Path, tmp_path: Path) -> Path:
    """The shared adult data (CRLF lines) with one valid LF line appended."""
    path = tmp_path / "adult.csv"
    shutil.copyfile(shared_data / "adult.csv", path)
    last = path.read_bytes().rstrip(b"\r\n").rsplit(b"\r\n", 1)[1]
    with path.open("ab") as handle:
        handle.write(last + b"\n")
    (tmp_path / "adult.toml").write_text(
        '[dataset]\nname = "adult"\n[tables.adult]\nsource = { csv = "adult.csv" }\n'
        'privacy_unit = "row"\n[tables.adult.columns]\nage = { type = "int", bounds = [17, 90] }\n'
    )
    return tmp_path / "adult.toml"


def test_adult_with_one_lf_line_is_answered_and_checked(
    adult_plus_lf: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with connect(str(adult_plus_lf), budget=1) as session:
        result = session.query("SELECT COUNT(*) FROM adult", epsilon="0.5")
        assert result.rows and session.remaining() == PureDP(Fraction(1, 2))
    assert main(["catalog", "check", str(adult_plus_lf)]) == 0
    assert "Table adult: 32,562 rows" in capsys.readouterr().out


def test_catalog_check_reports_skipped_lines_by_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "t", crlf(b"60,Female\r\n", b"1,2,3,4\r\n", b"6,\x00,x\r\n", b"7,a\r\n"))
    catalog_path = tmp_path / "t.toml"
    catalog_path.write_text(CATALOG.format(kind="csv", file="t.csv"))
    (table,) = profile_catalog(parse_catalog(catalog_path.read_text(), base_dir=tmp_path))
    assert table.rows == 4 and table.skipped_lines == 4
    assert table.skipped == {"too few fields": 2, "too many fields": 1, "NUL byte": 1}
    assert main(["catalog", "check", str(catalog_path)]) == 0
    words = " ".join(capsys.readouterr().out.split())
    assert "4 CSV line(s) could not be read and are skipped (1 NUL byte, 2 too few" in words


@pytest.fixture
def counted(tmp_path: Path) -> Iterator[tuple[Path, Catalog]]:
    catalog = write(tmp_path, "t", crlf())
    yield tmp_path / "t.csv", catalog


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: p.unlink(), "cannot be found"),
        (lambda p: p.write_bytes(b"name,other\r\n1,2\r\n"), "has no column 'age' in its header"),
    ],
    ids=["missing", "other header"],
)
def test_a_source_gone_after_opening_is_refused_for_free(
    counted: tuple[Path, Catalog], damage: Callable[[Path], None], message: str
) -> None:
    path, catalog = counted
    with connect(catalog, budget=1) as session:
        damage(path)
        with pytest.raises(CatalogError, match=message) as caught:
            session.query("SELECT COUNT(*) FROM t", epsilon="0.5")
        assert "table 't'" in str(caught.value) and f"'{path.name}'" in str(caught.value)
        assert caught.value.fix
        assert session.remaining() == PureDP(Fraction(1))
        assert session.ledger.entries() == []
        before = [a.outcome for a in session.ledger.audit()]
        with pytest.raises(CatalogError, match=message):
            session.query("SELECT COUNT(*) FROM t", epsilon="0.5")
        assert [a.outcome for a in session.ledger.audit()] == [*before, "refused"]
        assert session.remaining() == PureDP(Fraction(1)) and session.ledger.entries() == []


def test_a_truncated_parquet_file_is_refused_before_the_gate(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"age": [30, 40], "sex": ["Male", "Female"], "note": ["a", "b"]}), path)
    catalog = parse_catalog(CATALOG.format(kind="parquet", file="t.parquet"), base_dir=tmp_path)
    with connect(catalog, budget=1) as session:
        path.write_bytes(path.read_bytes()[:-10])
        with pytest.raises(CatalogError, match="not a complete Parquet file"):
            session.query("SELECT COUNT(*) FROM t", epsilon="0.5")
        assert session.remaining() == PureDP(Fraction(1)) and session.ledger.entries() == []
    with pytest.raises(CatalogError, match="not a complete Parquet file"):
        DuckDBExecutor(catalog)
