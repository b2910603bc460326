"""``dalenius demo``: generate a synthetic census and walk a newcomer through private queries."""

from __future__ import annotations

import argparse
import textwrap
from fractions import Fraction
from pathlib import Path
from typing import Any

from dalenius.cli.common import EXIT_OK
from dalenius.cli.render import progress
from dalenius.core.errors import BudgetExceededError
from dalenius.core.loss import ApproxDP
from dalenius.datasets.census import write_demo
from dalenius.engine.session import Session, connect

DEMO_BUDGET = ApproxDP(Fraction(2), Fraction(1, 10**5))
"""The demo analyst's budget: ε = 2 and δ = 1e-5 (δ lets groups without public keys be selected)."""
DEMO_ANALYST = "demo"


def register(sub: Any) -> None:
    """Add the ``demo`` sub-command."""
    parser = sub.add_parser(
        "demo",
        help="generate a synthetic census and run a guided tour of private queries",
        description=(
            "Generate a deterministic, entirely synthetic census (people with name, date of birth, "
            "ZIP code, sex, age, education, occupation, hours per week and income), write its "
            "catalog, and walk through private queries: answers, error bars, budget, refusal."
        ),
    )
    parser.add_argument(
        "--dir",
        default="dalenius-demo",
        help="where to write the data, catalog and ledger (default: ./dalenius-demo)",
    )
    parser.add_argument(
        "--people", type=int, default=50_000, help="number of people (default: 50000)"
    )
    parser.set_defaults(func=run_demo)


def _say(text: str = "") -> None:
    print(textwrap.indent(textwrap.dedent(text).strip("\n"), "  ") if text else "")


def _step(n: int, title: str) -> None:
    print()
    print(f"── {n}. {title} " + "─" * max(0, 66 - len(title)))


def _command(session: Session, verb: str, flags: str, sql: str) -> str:
    """The command that does what the walk-through does next, as it can be run from here."""
    catalog = session.catalog.path
    where = f"--catalog {catalog}" if catalog is not None else ""
    if verb == "query" and catalog is not None:
        ledger = catalog.parent / "ledger.sqlite"
        where += f" --ledger {ledger} --analyst {DEMO_ANALYST}"
    return f'dalenius {verb} {where} {flags} "{sql}"'


def _ask(session: Session, sql: str, epsilon: str, delta: str | None = None) -> None:
    flags = f"--epsilon {epsilon}" + (f" --delta {delta}" if delta else "")
    print(f"\n  {_command(session, 'query', flags, sql)}\n")
    result = session.query(sql, epsilon=epsilon, delta=delta)
    print(textwrap.indent(str(result), "  "))


def run_demo(args: argparse.Namespace) -> int:
    """Run ``dalenius demo``: the data and a budget, the tour of queries, the commands to try."""
    directory = Path(args.dir)
    catalog_path, ledger_path = _census_and_budget(directory, args.people)
    session = connect(
        catalog_path, budget=DEMO_BUDGET, ledger=str(ledger_path), analyst=DEMO_ANALYST
    )
    with session:
        sql = "SELECT COUNT(*) FROM people WHERE age >= 40"
        _first_answers(session, sql)
        _limits(session, sql)
    _your_turn(catalog_path, ledger_path)
    return EXIT_OK


def _census_and_budget(directory: Path, people: int) -> tuple[Path, Path]:
    """Steps 1 and 2: write the synthetic census and its catalog; a fresh ledger's path."""
    _step(1, "A synthetic census")
    print(f"  Writing {people:,} synthetic people to {directory}/ ...")
    with progress("generating", people, "people") as update:
        catalog_path = write_demo(directory, n=people, progress=update)
    print(f"  Catalog: {catalog_path}")
    _say(
        """
          The catalog is written by the data custodian. Everything in it is public: the privacy
          unit (here one row = one person), clipping bounds for numeric columns (age in [0, 100],
          income in [0, 500000]) and the list of possible values of categorical columns.
          Names, dates of birth and ZIP codes have no public keys: they can be filtered on, never
          listed.
        """
    )

    ledger_path = directory / "ledger.sqlite"
    for stale in directory.glob("ledger.sqlite*"):
        stale.unlink()
    _step(2, "A budget")
    print(
        f"  A fresh ledger at {ledger_path}: analyst {DEMO_ANALYST!r} may spend {DEMO_BUDGET} in total."
    )
    return catalog_path, ledger_path


def _first_answers(session: Session, sql: str) -> None:
    """Steps 3 to 6: explain, a count, groups and averages, medians."""
    _step(3, "Explain before you spend")
    print(f"\n  {_command(session, 'explain', '--epsilon 0.1', sql)}\n")
    print(textwrap.indent(str(session.explain(sql, epsilon="0.1")), "  "))

    _step(4, "A private count")
    _ask(session, sql, "0.1")
    print()
    _say(
        """
          The count is exact plus noise drawn from the operating system's cryptographic
          generator; the interval holds the exact count with 95% probability.
        """
    )

    _step(5, "Groups and averages")
    _ask(session, "SELECT education, COUNT(*), AVG(income) FROM people GROUP BY education", "0.5")
    print()
    _say(
        """
          Every education level declared in the catalog is answered, even an empty one, so the
          list of groups reveals nothing. Each person is in one group, so the groups share one
          ε (parallel composition); COUNT and AVG's hidden SUM split it (sequential composition).
          AVG = noisy SUM / noisy COUNT; small groups get wide intervals.
        """
    )

    _step(6, "Medians and bins")
    _ask(session, "SELECT sex, MEDIAN(income), MEDIAN(age) FROM people GROUP BY sex", "0.3")
    print()
    _say(
        """
          A median is chosen privately among bins of the public bounds (permute-and-flip); its
          error is a rank: the released value has about half the people below it, give or take
          the rank shown. Bins such as LEAST((age / 10) * 10, 80) work as group keys too: their
          keys follow from the public bounds of age.
        """
    )


def _limits(session: Session, sql: str) -> None:
    """Steps 7 to 9: undeclared groups, a repeated question, the end of the budget."""
    _step(7, "Groups nobody declared")
    _ask(
        session,
        "SELECT zip, COUNT(*) FROM people GROUP BY zip ORDER BY COUNT(*) DESC LIMIT 5",
        "0.5",
        "1e-6",
    )
    print()
    _say(
        """
          ZIP codes have no public list: a ZIP appears only if its noisy count passes a
          threshold set so that a ZIP code held by one person shows up with probability at
          most δ = 1e-6. ORDER BY and LIMIT are applied to the noisy answers, for free.
        """
    )

    _step(8, "Asking again does not help an attacker")
    _ask(session, sql, "0.1")
    print()
    _say(
        """
          The identical query got the identical answer from the ledger, at no cost: averaging
          many noisy answers to the same question gains nothing.
        """
    )

    _step(9, "When the budget runs out")
    big = "SELECT sex, AVG(hours_per_week) FROM people GROUP BY sex"
    print(f"\n  {_command(session, 'query', '--epsilon 1', big)}\n")
    try:
        session.query(big, epsilon="1")
        print("  (answered)")
    except BudgetExceededError as exc:
        print(textwrap.indent(f"refused: {exc}", "  "))
    print(
        f"\n  Remaining: {session.remaining()}. Nothing was read and nothing was spent by the refusal."
    )


def _your_turn(catalog_path: Path, ledger_path: Path) -> None:
    """Step 10: commands to try next."""
    _step(10, "Your turn")
    _say(
        f"""
          dalenius explain --catalog {catalog_path} --epsilon 0.2 "SELECT state, COUNT(*) FROM people GROUP BY state"
          dalenius query   --catalog {catalog_path} --ledger {ledger_path} --analyst {DEMO_ANALYST} --epsilon 0.05 "SELECT AVG(age) FROM people WHERE sex = 'Female'"
          dalenius query   --catalog {catalog_path} --ledger {ledger_path} --analyst {DEMO_ANALYST} --target-error 100 "SELECT COUNT(*) FROM people WHERE age >= 40"
          dalenius explain --catalog {catalog_path} --epsilon 0.2 "SELECT p.education, COUNT(*) AS visits FROM people p JOIN visits v ON p.person_id = v.person_id GROUP BY p.education"
          dalenius budget show --ledger {ledger_path}
          dalenius ledger list --ledger {ledger_path}

        The third asks for an error instead of an ε (the smallest ε meeting ±100 is spent); the
        fourth joins two private tables on the person they both protect.
        """
    )
