"""Where contribution bounding's time goes: Q9's exact statement on DuckDB, whole and in parts.

Q9 of ``bench/engines.py`` (``SELECT state, AVG(score) FROM arrivals GROUP BY state``, the person
the privacy unit, 8% of persons over the cap of 5 rows) is run as Dalenius writes it and with
parts of it replaced, in one run, forms interleaved, median CPU time of this process:

* as it is;
* the group window (``DENSE_RANK`` ordered by the keyed MD5 of the person and the group) replaced
  by the constant 1 — the same rows here, where each person's rows share one ``state``;
* that, with the rows ordered by ``score`` instead of their keyed MD5 — what the hash costs (a
  different choice of rows: timing only);
* the group window computed over the distinct (person, group) pairs and joined back to the rows
  — the same ranks, a form that hashes each group once instead of once per row.

Each variant's answer is printed beside it, so that the ones that keep the rows can be seen to
give the same exact answer. Run ``bench/engines.py`` at the same ``--rows`` first (it writes the
data):

    .venv/bin/python bench/bounding.py --rows 1000000 [--repeats 5]

This is a benchmark, not a test: it asserts nothing. The salt is fixed (12345) so that the runs
compare the same statement; the product draws it per query.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import duckdb

from dalenius.core.catalog import load_catalog
from dalenius.core.loss import ApproxDP
from dalenius.engine.session import connect
from dalenius.ledger import open_ledger

Q9 = "SELECT state, AVG(score) FROM arrivals GROUP BY state"
UNIT, KEY = '"arrivals__person_id"', '"arrivals__state"'


def statement(catalog_path: Path) -> str:
    """Q9's exact statement for DuckDB, as Dalenius writes it (nothing is spent)."""
    catalog = load_catalog(catalog_path)
    ledger = open_ledger(":memory:")
    ledger.set_budget("bench", catalog.name, ApproxDP(Fraction(1), Fraction(0)))
    session = connect(catalog, ledger=ledger, analyst="bench")
    return session.prepare(Q9, 1, salt=12345).exact.main


def variants(sql: str) -> dict[str, str]:
    """Name -> statement: Q9's, and the forms described in the module's docstring."""
    start = sql.index("FROM (SELECT *, DENSE_RANK()")
    end = sql.index("AS __grouped WHERE __group_rank <= 1)")
    window = sql[sql.index("DENSE_RANK()", start) : sql.index(" AS __group_rank", start)]
    filtered = sql[sql.index("(SELECT __s.* FROM __input", start) : end]
    filtered = filtered[: filtered.rindex(" AS __filtered")]
    constant = (
        f"{sql[:start]}FROM (SELECT *, 1 AS __group_rank FROM {filtered} AS __filtered) {sql[end:]}"
    )
    order = constant.index("ORDER BY MD5(", constant.index("ROW_NUMBER() OVER"))
    after = constant.index(") AS __row_rank", order)
    unhashed = f'{constant[:order]}ORDER BY "arrivals__score"{constant[after:]}'
    joined = (
        f"FROM (SELECT __f.*, __g.__group_rank FROM {filtered} AS __f JOIN (SELECT {UNIT}, {KEY}, "
        f"{window} AS __group_rank FROM (SELECT DISTINCT {UNIT}, {KEY} FROM {filtered} AS __d) "
        f"AS __filtered) AS __g ON __f.{UNIT} = __g.{UNIT} "
        f"AND __f.{KEY} IS NOT DISTINCT FROM __g.{KEY}) "
    )
    return {
        "as it is": sql,
        "group window -> constant 1": constant,
        "  and rows ordered by score, no MD5": unhashed,
        "distinct groups ranked, joined back": f"{sql[:start]}{joined}{sql[end:]}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "dalenius-bench")
    args = parser.parse_args(argv)
    folder = args.data / f"rows-{args.rows}"
    chosen = variants(statement(folder / "census.toml"))
    con = duckdb.connect()
    con.execute(
        f"CREATE VIEW arrivals AS SELECT * FROM read_parquet('{folder / 'arrivals.parquet'}')"
    )
    times: dict[str, list[float]] = {name: [] for name in chosen}
    answers = {name: sorted(con.execute(sql).fetchall())[:1] for name, sql in chosen.items()}
    for _ in range(args.repeats):  # interleaved, so load on the machine hits every form alike
        for name, sql in chosen.items():
            start = time.process_time()
            con.execute(sql).fetchall()
            times[name].append(time.process_time() - start)
    print(
        f"Q9 on DuckDB {duckdb.__version__}, {args.rows:,} persons, median CPU ms of {args.repeats}"
    )
    for name in chosen:
        print(
            f"{name:<40} {statistics.median(times[name]) * 1e3:9.1f}   first group {answers[name]}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
