"""Every release can be fetched again by its ledger entry id: the same values, at no cost.

Data are generated with seeded numpy generators (data only); the noise comes from the OS generator.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from tests.releases.test_onthemap import jobs, write

import dalenius
from dalenius.core.errors import QueryError
from dalenius.core.loss import ApproxDP


def test_every_kind_of_release_comes_back_by_id_for_free(tmp_path: Path) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    catalog = write(tmp_path, jobs(persons=400))
    budget = ApproxDP(Fraction(40), Fraction(1, 10**4))
    session = dalenius.connect(catalog, budget=budget, ledger=ledger)
    density = session.density("jobs", "wage", bandwidth=10, epsilon=1, delta=1e-6, points=20)
    hierarchy = session.hierarchy("jobs", ["work", "home"], epsilon=1)
    synthetic = session.synthesize("jobs", ["home", "work", "wage"], epsilon=1, delta=1e-6)
    flows = session.onthemap("jobs", origin="home", destination="work", epsilon=8, prior=1)
    spent = session.remaining()
    session.close()

    again = dalenius.connect(catalog, ledger=ledger)  # a new session on the same ledger
    d = again.release(density.entry_id or "")
    assert d.cached and d.loss == density.loss
    assert np.array_equal(d.release.density, density.release.density)
    assert np.array_equal(d.release.band_low, density.release.band_low)
    h = again.release(hierarchy.entry_id or "")
    assert np.array_equal(h.release.final, hierarchy.release.final)
    assert h.to_pandas().equals(hierarchy.to_pandas())
    s = again.release(synthetic.entry_id or "")
    assert s.to_pandas().equals(synthetic.to_pandas())
    f = again.release(flows.entry_id or "")
    assert np.array_equal(f.release.counts, flows.release.counts)
    assert f.to_pandas().to_csv(index=False) == flows.to_pandas().to_csv(index=False)
    assert again.remaining() == spent
    fetched = [a for a in again.ledger.audit(principal="analyst") if a.sql.startswith("FETCH")]
    assert len(fetched) == 4


def test_an_unknown_or_foreign_id_is_refused_and_spends_nothing(tmp_path: Path) -> None:
    ledger = str(tmp_path / "ledger.sqlite")
    catalog = write(tmp_path, jobs())
    alice = dalenius.connect(catalog, budget=10, ledger=ledger, analyst="alice")
    released = alice.hierarchy("jobs", ["work"], epsilon=1)
    answer = alice.query("SELECT COUNT(*) FROM jobs", epsilon=1)
    bob = dalenius.connect(catalog, budget=10, ledger=ledger, analyst="bob")
    with pytest.raises(QueryError, match="no released entry"):
        bob.release(released.entry_id or "")
    with pytest.raises(QueryError, match="no released entry"):
        alice.release("no-such-id")
    with pytest.raises(QueryError, match="not a release"):
        alice.release(answer.entry_id or "")
    assert bob.remaining() == dalenius.connect(catalog, ledger=ledger, analyst="bob").remaining()


def test_the_cli_downloads_the_same_file_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from dalenius.cli.main import main

    catalog = write(tmp_path, jobs())
    ledger = str(tmp_path / "l.sqlite")
    common = ["--catalog", str(catalog), "--ledger", ledger]
    assert main(["hierarchy", *common, "--table", "jobs", "--level", "work", "--epsilon", "1",
                 "--budget", "2", "--csv", str(tmp_path / "a.csv"), "--json"]) == 0  # fmt: skip
    entry = json.loads(capsys.readouterr().out)["entry_id"]
    assert main(["download", entry[:8], *common, "--out", str(tmp_path / "b.csv")]) == 0
    assert "no new cost" in capsys.readouterr().out
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert main(["download", "nothing-here", *common]) == 2
    assert "ledger list" in capsys.readouterr().err
