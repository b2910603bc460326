"""Every SQL query of the course documents on privacy attacks and differential privacy is
answered, or refused with a fix that, applied, leads to an answer.

The course's table ``person`` (and ``T``) is the Adult data with names added; here it is the
catalog's ``adult``, which holds no names. Each query is written as the course wrote it (typos,
double quotes and trailing ``;`` included); each refusal's fix is applied as an analyst would,
until the query is answered. The course texts themselves are not read by the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest

from dalenius.core.catalog import load_catalog
from dalenius.core.errors import UserError
from dalenius.core.loss import ApproxDP
from dalenius.engine.session import Session
from dalenius.executors.duckdb import DuckDBExecutor
from dalenius.ledger import open_ledger

# (the query as the course wrote it, [(a fragment of the refusal's fix, the query with it applied)])
COURSE = [
    ("SELECT sum(age) FROM person;", [("use one of: adult", "SELECT sum(age) FROM adult;")]),
    (
        'SELECT sum(age) FROM person  \nWHERE nombre <>"Alan Brito";',
        [
            ("use one of: adult", 'SELECT sum(age) FROM adult  \nWHERE nombre <>"Alan Brito";'),
            ("occupation", 'SELECT sum(age) FROM adult  \nWHERE occupation <>"Alan Brito";'),
            (
                "'Alan Brito' in single quotes",
                "SELECT sum(age) FROM adult  \nWHERE occupation <>'Alan Brito';",
            ),
        ],
    ),
    (
        "SELECT Clds, count(*) FROM T\nGROUP BY Clds",
        [
            ("use one of: adult", "SELECT Clds, count(*) FROM adult\nGROUP BY Clds"),
            ("education", "SELECT education, count(*) FROM adult\nGROUP BY education"),
        ],
    ),
    (
        "SELECT age as a, education_num as e, count(*)as c FROM person\n"
        "GROUP BY age, education_num ORDER BY c ASC;",
        [
            (
                "use one of: adult",
                "SELECT age as a, education_num as e, count(*)as c FROM adult\n"
                "GROUP BY age, education_num ORDER BY c ASC;",
            )
        ],
    ),
    (
        "SELECT (age/10)*10 as a, (education_num/10)*10 as e,  \ncount(*) as c  \nFROM person  \n"
        "GROUP BY (age/10)*10, (education_num/10)*10  \nORDER BY c ASC;",
        [
            (
                "use one of: adult",
                "SELECT (age/10)*10 as a, (education_num/10)*10 as e,  \ncount(*) as c  \n"
                "FROM adult  \nGROUP BY (age/10)*10, (education_num/10)*10  \nORDER BY c ASC;",
            )
        ],
    ),
    *(
        (
            f"SELECT LEAST((age/10)*10,60) as a, (education_num/10)*10 as e, {count}\n"
            f"FROM person\nGROUP BY LEAST((age/10)*10,60), (education_num/10)*10\nORDER BY c ASC;",
            [
                (
                    "use one of: adult",
                    f"SELECT LEAST((age/10)*10,60) as a, (education_num/10)*10 as e, {count}\n"
                    "FROM adult\nGROUP BY LEAST((age/10)*10,60), (education_num/10)*10\n"
                    "ORDER BY c ASC;",
                )
            ],
        )
        for count in ("count(*) as c", "count(*)as c")
    ),
    (
        "SELECT Clds, count (DISTINCT S)  \nFROM T GROUP BY Clds",
        [
            ("use one of: adult", "SELECT Clds, count (DISTINCT S)  \nFROM adult GROUP BY Clds"),
            ("education", "SELECT education, count (DISTINCT S)  \nFROM adult GROUP BY education"),
            (
                "occupation",
                "SELECT education, count (DISTINCT occupation)  \nFROM adult GROUP BY education",
            ),
        ],
    ),
    (
        "SELECT count(*) FROM person WHERE age >= 40",
        [("use one of: adult", "SELECT count(*) FROM adult WHERE age >= 40")],
    ),
    (
        "SELECT count(*) FROM person  \nWHERE name='Alan Brito' AND target='<=50k'",
        [
            (
                "use one of: adult",
                "SELECT count(*) FROM adult  \nWHERE name='Alan Brito' AND target='<=50k'",
            ),
            # No names in the catalog: the condition on one is dropped.
            ("income", "SELECT count(*) FROM adult  \nWHERE target='<=50k'"),
            ("income", "SELECT count(*) FROM adult  \nWHERE income='<=50k'"),
        ],
    ),
]


@pytest.fixture(scope="module")
def session(adult_catalog_path: Path) -> Iterator[Session]:
    catalog = load_catalog(adult_catalog_path)
    ledger = open_ledger(None)
    ledger.set_budget("analyst", catalog.name, ApproxDP(Fraction(100), Fraction(1, 10**4)))
    with Session(catalog, ledger=ledger, executor=DuckDBExecutor(catalog)) as s:
        yield s


@pytest.mark.parametrize(("sql", "fixes"), COURSE, ids=lambda v: v if isinstance(v, str) else "")
def test_each_course_query_is_answered_or_fixed(
    session: Session, sql: str, fixes: list[tuple[str, str]]
) -> None:
    for fragment, fixed in fixes:
        with pytest.raises(UserError) as err:
            session.explain(sql, epsilon=1)
        assert fragment in (err.value.fix or ""), (sql, err.value)
        sql = fixed
    result = session.query(sql, epsilon="0.1")
    assert result.rows
    for row, lows, highs in zip(result.rows, result.lows, result.highs, strict=True):
        for value, low, high in zip(row, lows, highs, strict=True):
            assert low is None or low <= value <= high


def test_the_typo_in_the_course_is_hinted_and_strict_refuses_it(session: Session) -> None:
    sql = "SELECT count(*) FROM adult  \nWHERE income='<=50k'"
    (note,) = [n for n in session.explain(sql, epsilon=1).notes if n.startswith("hint:")]
    assert "did you mean '<=50K'?" in note
