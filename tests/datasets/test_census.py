"""The public API of the synthetic census: determinism, shape, declared metadata and files."""

from __future__ import annotations

import datetime
import math
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dalenius.core.catalog import Catalog, load_catalog
from dalenius.core.errors import ConfigurationError
from dalenius.core.unit import IdUnit
from dalenius.datasets import census, vocab
from dalenius.datasets.census import (
    generate_people,
    generate_visits,
    write_benchmark,
    write_demo,
)
from dalenius.datasets.model import ZIP_COUNT
from dalenius.datasets.schema import PEOPLE_SCHEMA, REFERENCE_DATE, VISITS_SCHEMA

LARGE_N = 200_000


@pytest.fixture(scope="module")
def people() -> pa.Table:
    return generate_people(LARGE_N)


@pytest.fixture(scope="module")
def visits(people: pa.Table) -> pa.Table:
    return generate_visits(people)


@pytest.fixture(scope="module")
def demo_catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    return load_catalog(write_demo(tmp_path_factory.mktemp("demo"), n=2_000))


def _column(table: pa.Table, name: str) -> np.ndarray:
    values: np.ndarray = table.column(name).to_numpy()
    return values


# --- determinism -------------------------------------------------------------------------------


def test_same_seed_gives_identical_tables_and_another_seed_does_not() -> None:
    first = generate_people(20_000, seed=11)
    again = generate_people(20_000, seed=11)
    other = generate_people(20_000, seed=12)
    assert first.equals(again)
    assert generate_visits(first, seed=11).equals(generate_visits(again, seed=11))
    assert not first.equals(other)
    assert not generate_visits(first, seed=11).equals(generate_visits(first, seed=12))


def test_written_files_are_bit_identical_for_the_same_seed(tmp_path: Path) -> None:
    one = write_demo(tmp_path / "one", n=5_000, seed=3).parent
    two = write_demo(tmp_path / "two", n=5_000, seed=3).parent
    names = sorted(p.name for p in one.iterdir())
    assert names == [
        "census.toml",
        "people.csv",
        "people.parquet",
        "visits.csv",
        "visits.parquet",
    ]
    assert names == sorted(p.name for p in two.iterdir())
    for name in names:
        assert (one / name).read_bytes() == (two / name).read_bytes(), name


def test_streamed_files_hold_exactly_the_in_memory_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small chunks make a 10,000-person table span three chunks, as 10M rows span ten.
    monkeypatch.setattr(census, "CHUNK_ROWS", 4_096)
    written: list[int] = []
    catalog = load_catalog(write_benchmark(tmp_path, 10_000, seed=5, progress=written.append))
    assert written == [4_096, 8_192, 10_000]  # one report per chunk, for the benchmark's bar
    people = generate_people(10_000, seed=5)
    visits = generate_visits(people, seed=5)
    people_file = pq.ParquetFile(tmp_path / "people.parquet")
    assert people_file.metadata.num_row_groups == 3
    assert people_file.read().equals(people)
    assert pq.read_table(tmp_path / "visits.parquet").equals(visits)
    assert np.array_equal(_column(visits, "visit_id"), np.arange(1, visits.num_rows + 1))
    assert catalog.name == "census_benchmark"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "census.toml",
        "people.parquet",
        "visits.parquet",
    ]


# --- schema and values -------------------------------------------------------------------------


def test_schemas_types_and_no_nulls(people: pa.Table, visits: pa.Table) -> None:
    assert people.schema == PEOPLE_SCHEMA
    assert visits.schema == VISITS_SCHEMA
    assert people.schema.field("date_of_birth").type == pa.date32()
    for table in (people, visits):
        for name in table.column_names:
            assert table.column(name).null_count == 0, name


def test_person_ids_run_from_1_to_n(people: pa.Table) -> None:
    assert np.array_equal(_column(people, "person_id"), np.arange(1, LARGE_N + 1))


def test_empty_tables_keep_the_schema() -> None:
    empty = generate_people(0)
    assert empty.num_rows == 0
    assert empty.schema == PEOPLE_SCHEMA
    assert generate_visits(empty).schema == VISITS_SCHEMA
    assert generate_visits(empty).num_rows == 0


def test_values_stay_inside_the_catalog_bounds_and_keys(
    people: pa.Table, visits: pa.Table, demo_catalog: Catalog
) -> None:
    checked = 0
    for name, table in (("people", people), ("visits", visits)):
        declared = demo_catalog.table(name)
        assert declared is not None
        assert declared.column_names == tuple(table.column_names)
        for column in declared.columns:
            values = table.column(column.name)
            if column.bounds is not None:
                low, high = column.bounds
                assert low <= pc.min(values).as_py(), (name, column.name)
                assert pc.max(values).as_py() <= high, (name, column.name)
                checked += 1
            if column.keys is not None:
                seen = set(pc.unique(values).to_pylist())
                assert seen <= set(column.keys), (name, column.name, seen - set(column.keys))
                checked += 1
    assert checked == 14


def test_large_samples_use_every_key_of_the_key_columns(people: pa.Table) -> None:
    for column, keys in (
        ("state", vocab.STATE_CODES),
        ("sex", vocab.SEXES),
        ("education", vocab.EDUCATION),
        ("occupation", vocab.OCCUPATIONS),
        ("married", (False, True)),
    ):
        assert set(pc.unique(people.column(column)).to_pylist()) == set(keys), column


def test_age_is_whole_years_from_date_of_birth_to_the_reference_date(people: pa.Table) -> None:
    born = people.column("date_of_birth")
    year = pc.year(born).to_numpy()
    month = pc.month(born).to_numpy()
    day = pc.day(born).to_numpy()
    # Whole years to REFERENCE_DATE: one less when the birthday comes later in the year.
    after = (month > REFERENCE_DATE.month) | (
        (month == REFERENCE_DATE.month) & (day > REFERENCE_DATE.day)
    )
    expected = REFERENCE_DATE.year - year - after
    assert np.array_equal(_column(people, "age"), expected)
    oldest = pc.min(born).as_py()
    assert oldest >= datetime.date(REFERENCE_DATE.year - 101, 1, 2)
    assert pc.max(born).as_py() <= REFERENCE_DATE


def test_names_pair_a_given_name_of_the_right_sex_with_a_surname(people: pa.Table) -> None:
    parts = pc.split_pattern(people.column("name"), " ")
    first = pc.list_element(parts, 0).to_numpy(zero_copy_only=False)
    last = pc.list_element(parts, 1).to_numpy(zero_copy_only=False)
    assert set(pc.list_value_length(parts).to_pylist()) == {2}
    female = _column(people, "sex") == "Female"
    assert set(first[female]) <= set(vocab.FEMALE_NAMES)
    assert set(first[~female]) <= set(vocab.MALE_NAMES)
    assert set(last) <= set(vocab.SURNAMES)


# --- the catalog -------------------------------------------------------------------------------


def test_demo_catalog_declares_the_documented_metadata(demo_catalog: Catalog) -> None:
    people = demo_catalog.table("people")
    visits = demo_catalog.table("visits")
    assert people is not None
    assert visits is not None
    assert demo_catalog.name == "census"
    assert "synthetic" in demo_catalog.description.lower()
    # The same unit on both tables: the private ⋈ private join on the person is answerable.
    assert people.privacy_unit == IdUnit(column="person_id", max_rows=1, max_groups=1)
    assert visits.privacy_unit == IdUnit(column="person_id", max_rows=5, max_groups=1)
    assert people.source.kind == "parquet"
    assert Path(people.source.location).name == "people.parquet"

    def column(table_name: str, name: str) -> tuple[object, object]:
        table = demo_catalog.table(table_name)
        assert table is not None
        col = table.column(name)
        assert col is not None
        return col.bounds, col.keys

    for table_name in ("people", "visits"):
        assert column(table_name, "age") == ((0, 100), None)
        assert column(table_name, "hours_per_week") == ((0, 99), None)
        assert column(table_name, "income") == ((0, 500_000), None)
        assert column(table_name, "zip") == (None, None)
    assert column("people", "sex") == (None, ("Female", "Male"))
    assert column("people", "education") == (None, vocab.EDUCATION)
    assert column("people", "occupation") == (None, vocab.OCCUPATIONS)
    assert column("people", "state") == (None, vocab.STATE_CODES)
    assert column("people", "married") == (None, (False, True))
    assert column("people", "name") == (None, None)
    assert column("people", "date_of_birth") == (None, None)
    assert len(vocab.STATE_CODES) == len(set(vocab.STATE_CODES)) == 50
    assert len(vocab.EDUCATION) == 16


def test_csv_only_demo_points_the_catalog_at_csv_files(tmp_path: Path) -> None:
    catalog = load_catalog(write_demo(tmp_path, n=500, formats="csv"))
    for table in catalog.tables:
        assert table.source.kind == "csv"
        assert Path(table.source.location).name == f"{table.name}.csv"
    assert not list(tmp_path.glob("*.parquet"))


def test_csv_keeps_zip_codes_as_text_with_leading_zeros(tmp_path: Path) -> None:
    write_demo(tmp_path, n=20_000)
    csv_file = str(tmp_path / "people.csv")
    con = duckdb.connect()
    described = con.execute(f"DESCRIBE SELECT * FROM read_csv('{csv_file}')").fetchall()
    types = {row[0]: row[1] for row in described}
    assert types["zip"] == "VARCHAR"
    from_csv = con.execute(f"SELECT zip FROM read_csv('{csv_file}') ORDER BY person_id").fetchall()
    from_parquet = pq.read_table(tmp_path / "people.parquet").column("zip").to_pylist()
    assert [row[0] for row in from_csv] == from_parquet
    # New England ZIP codes start with 0; losing it would turn them into 4-digit numbers.
    assert any(code.startswith("0") for code in from_parquet)


# --- visits ------------------------------------------------------------------------------------


def test_every_person_has_one_to_five_visits(people: pa.Table, visits: pa.Table) -> None:
    per_person = np.bincount(_column(visits, "person_id"), minlength=LARGE_N + 1)[1:]
    assert per_person.min() == 1
    assert per_person.max() == 5
    assert set(np.unique(per_person).tolist()) == {1, 2, 3, 4, 5}
    assert np.array_equal(_column(visits, "visit_id"), np.arange(1, visits.num_rows + 1))


def test_visits_repeat_their_persons_attributes(people: pa.Table, visits: pa.Table) -> None:
    owner = pa.array(_column(visits, "person_id") - 1)
    for name in ("age", "education", "state", "zip", "hours_per_week", "income"):
        assert visits.column(name).equals(people.column(name).take(owner)), name
    days = pc.year(visits.column("visit_date")).to_numpy()
    assert set(np.unique(days).tolist()) == {REFERENCE_DATE.year - 1}


# --- ZIP codes and states ----------------------------------------------------------------------


def _zip_prefix_to_state() -> dict[int, str]:
    mapping = {}
    for code, _, ranges in vocab.STATES:
        for low, high in ranges:
            for prefix in range(low, high + 1):
                mapping[prefix] = code
    return mapping


def test_zip_codes_are_five_digits_inside_their_states_ranges(people: pa.Table) -> None:
    zips = _column(people, "zip").astype(str)
    assert set(np.char.str_len(zips).tolist()) == {5}
    assert np.char.isdigit(zips).all()
    pairs = pa.table({"zip": people.column("zip"), "state": people.column("state")})
    distinct = pairs.group_by(["zip", "state"]).aggregate([]).to_pylist()
    prefix_state = _zip_prefix_to_state()
    wrong = [p for p in distinct if prefix_state.get(int(p["zip"][:3])) != p["state"]]
    assert wrong == []


def test_large_samples_see_about_5000_zip_codes_with_skewed_populations(
    people: pa.Table,
) -> None:
    counts = np.sort(pc.value_counts(people.column("zip")).field("counts").to_numpy())[::-1]
    # Nearly every one of the 5,000 ZIP codes has someone at n = 200,000 (4,965 to 4,977 over
    # seeds 1 to 8 and 1994); a few tiny ones may be empty.
    assert 4_800 <= counts.size <= ZIP_COUNT
    # Skewed like real ZIP populations: the largest tenth holds about 40% of people, not 10%.
    assert counts[: counts.size // 10].sum() / LARGE_N > 0.3
    small = generate_people(1_000)
    assert len(pc.unique(small.column("zip"))) < 1_000


def test_state_shares_follow_2020_populations(people: pa.Table) -> None:
    population = np.array([pop for _, pop, _ in vocab.STATES], dtype=float)
    expected = population / population.sum()
    counts = pc.value_counts(people.column("state"))
    observed = dict(
        zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True)
    )
    # A state's count is binomial(n, share). |z| > 5.5 has two-sided probability 3.8e-8, so the
    # 50 checks together raise a false alarm with probability below 2e-6 for any seed.
    for code, share in zip(vocab.STATE_CODES, expected, strict=True):
        sd = math.sqrt(LARGE_N * share * (1 - share))
        z = (observed.get(code, 0) - LARGE_N * share) / sd
        assert abs(z) < 5.5, (code, z)


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [-1, True, 2.5, "10"])
def test_bad_sizes_are_refused_with_a_fix(n: object) -> None:
    with pytest.raises(ConfigurationError, match=r"n must be a whole number") as info:
        generate_people(n)  # type: ignore[arg-type]
    assert info.value.fix is not None
    assert repr(n) in info.value.what


@pytest.mark.parametrize("seed", [-3, False, 1.0, None])
def test_bad_seeds_are_refused_with_a_fix(seed: object) -> None:
    with pytest.raises(ConfigurationError, match=r"seed must be a whole number >= 0") as info:
        generate_people(10, seed=seed)  # type: ignore[arg-type]
    assert "seed=1994" in (info.value.fix or "")


@pytest.mark.parametrize("formats", [(), ("xlsx",), ("csv", "json")])
def test_bad_formats_are_refused_and_nothing_is_written(
    tmp_path: Path, formats: tuple[str, ...]
) -> None:
    target = tmp_path / "demo"
    with pytest.raises(ConfigurationError, match="formats must be a non-empty selection"):
        write_demo(target, n=10, formats=formats)
    assert not target.exists()


def test_zero_people_demo_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"n must be a whole number of people >= 1; got 0"):
        write_demo(tmp_path / "demo", n=0)
    with pytest.raises(ConfigurationError, match=r"n_rows must be .* >= 1; got -5"):
        write_benchmark(tmp_path / "bench", -5)
    assert list(tmp_path.iterdir()) == []


def test_a_file_in_place_of_the_folder_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "demo"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigurationError, match="it is a file, not a folder"):
        write_demo(blocker, n=10)
    assert blocker.read_text() == "not a folder"


def test_visits_need_the_persons_columns_with_their_types() -> None:
    people = generate_people(50)
    with pytest.raises(ConfigurationError, match=r"zip is missing; income is missing"):
        generate_visits(people.drop_columns(["zip", "income"]))
    recast = people.set_column(
        people.schema.get_field_index("age"), "age", people.column("age").cast(pa.int32())
    )
    with pytest.raises(ConfigurationError, match=r"age is int32, not int64"):
        generate_visits(recast)
    with pytest.raises(ConfigurationError, match=r"people must be a pyarrow.Table; got dict"):
        generate_visits({"person_id": [1]})


def test_demo_people_join_visits_on_the_person(demo_catalog: Catalog) -> None:
    """The headline private ⋈ private join: one person's rows multiply (1 × 5), in either order."""
    import duckdb

    from dalenius.engine.session import connect

    visits = demo_catalog.table("visits")
    assert visits is not None
    truth = duckdb.sql(f"SELECT COUNT(*) FROM '{visits.source.location}'").fetchall()[0][0]
    orders = (
        "SELECT COUNT(*) FROM people p JOIN visits v ON p.person_id = v.person_id",
        "SELECT COUNT(*) FROM visits v JOIN people p ON v.person_id = p.person_id",
    )
    with connect(demo_catalog, budget=100) as session:
        for sql in orders:
            [measured] = session.explain(sql, epsilon=1).measurements
            assert measured.sensitivity == 5  # at most 1 × 5 joined rows per person
            result = session.query(sql, epsilon=20, confidence=1 - 1e-9)
            low, high = result.interval(0, "COUNT(*)")
            assert low <= truth <= high  # fails with probability 1e-9
