"""The statistical model of the synthetic census: how each column depends on the others.

One chunk of people is drawn column by column, each conditional on those before it: ZIP code (and
so state), age, sex, date of birth, education, employment, hours, occupation, income, marital
status and name. The shapes follow public US statistics (2020 Census population by state and age,
the UCI Adult mixes of education and occupation) loosely enough to be plainly synthetic but
faithfully enough that DP answers on it tell a believable story: income rises with education,
hours and experience; children have no income and only the schooling of their age. The model is
described for readers in ``docs/demo-data.md``.

Every draw comes from the ``numpy.random.Generator`` passed in (see
:mod:`dalenius.datasets.sampling`); nothing here is privacy noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dalenius.datasets import vocab
from dalenius.datasets.sampling import AliasTable, FloatArray, IntArray, alias_table, generator
from dalenius.datasets.schema import (
    MAX_AGE,
    MAX_HOURS,
    MAX_INCOME,
    MAX_VISIT_MINUTES,
    PEOPLE_SCHEMA,
    PERSON_ATTRIBUTES,
    REFERENCE_DATE,
    VISITS_SCHEMA,
)

BoolArray = npt.NDArray[np.bool_]

ZIP_COUNT = 5_000
"""How many distinct ZIP codes the generator draws from (nearly all appear once n >= 200,000)."""

_AGES = np.arange(MAX_AGE + 1)

# Persons per year of age, shaped like the 2020 US population pyramid (about 22% under 18).
_AGE = alias_table(
    np.interp(
        _AGES,
        [0, 17, 25, 35, 55, 62, 70, 80, 90, 100],
        [3.8, 4.2, 4.5, 4.4, 4.2, 4.3, 3.2, 1.8, 0.6, 0.02],
    )
)

# Women outlive men, so the share of women rises with age.
_P_FEMALE = np.interp(_AGES, [0, 50, 70, 85, 100], [0.488, 0.505, 0.53, 0.62, 0.78])


def _education_weights() -> FloatArray:
    """Weights of the 16 education levels (columns) for each age 0..100 (rows)."""
    weights = np.zeros((MAX_AGE + 1, len(vocab.EDUCATION)))
    level = {name: i for i, name in enumerate(vocab.EDUCATION)}
    # Children are in the grade their age implies (or have just finished it).
    school = [(0, 5, "Preschool"), (6, 9, "1st-4th"), (10, 11, "5th-6th"), (12, 13, "7th-8th")]
    for low, high, grade in school:
        weights[low : high + 1, level[grade]] = 1.0
    for age, grade in ((14, "9th"), (15, "10th"), (16, "11th")):
        weights[age, level[grade]] = 1.0
    weights[17, level["11th"]] = 0.3
    weights[17, level["12th"]] = 0.7
    late_teens = [0, 0, 0, 0, 0, 3, 5, 10, 35, 40, 4, 3, 0, 0, 0, 0]
    early_twenties = [0, 0, 0, 0, 2, 3, 4, 3, 28, 30, 4, 4, 22, 0, 0, 0]
    # From 25 on, the UCI Adult mix, with younger cohorts more schooled than older ones.
    young = [0.1, 0.3, 0.6, 1.0, 1.0, 1.8, 2.4, 1.2, 27, 20, 4.5, 3.8, 22, 9, 2, 1.5]
    middle = [0.2, 0.5, 1.0, 1.8, 1.6, 2.8, 3.4, 1.3, 31, 21, 4.3, 3.3, 17, 7, 1.8, 1.3]
    older = [0.4, 1.2, 2.0, 4.5, 2.5, 3.5, 4.0, 1.5, 36, 18, 3.5, 2.5, 12, 5.5, 1.6, 1.1]
    bands = ((18, 21, late_teens), (22, 24, early_twenties), (25, 44, young), (45, 64, middle))
    for low, high, mix in bands:
        weights[low : high + 1] = mix
    weights[65:] = older
    return weights


_EDUCATION = alias_table(_education_weights())

# Log-income premium of each education level over HS-grad (+73% for a bachelor's degree).
_EDUCATION_PREMIUM = np.array(
    [
        -0.7,
        -0.6,
        -0.55,
        -0.45,
        -0.4,
        -0.35,
        -0.3,
        -0.25,
        0.0,
        0.12,
        0.2,
        0.25,
        0.55,
        0.75,
        1.05,
        0.95,
    ]
)

# Education buckets for occupation and employment: below HS-grad, HS-grad, some college or
# associate, bachelor's, graduate degree.
_EDUCATION_BUCKET = np.array([0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 2, 3, 4, 4, 4])
_EMPLOYMENT_FACTOR = np.array([0.8, 1.0, 1.03, 1.1, 1.12])

# Occupation weights per education bucket (rows), in vocab.OCCUPATIONS order without Not-working.
_OCCUPATION_WEIGHTS = np.array(
    [
        [1, 16, 22, 9, 3, 1, 12, 12, 5, 7, 8, 2, 2, 0.1],
        [2, 17, 14, 11, 9, 3, 6, 9, 13, 4, 7, 0.5, 3, 0.2],
        [5, 11, 11, 13, 13, 8, 3, 5, 16, 2, 4, 0.3, 3, 0.3],
        [4, 4, 4, 15, 26, 30, 1, 1, 9, 1, 1, 0.1, 2, 0.2],
        [2, 1, 1, 6, 24, 62, 0.3, 0.3, 3, 0.5, 0.3, 0.1, 1, 0.1],
    ]
)
# Occupational segregation by sex, as in the Adult data: multiplies the weights for women.
_FEMALE_OCCUPATION_FACTOR = np.array(
    [1.0, 0.15, 1.6, 1.0, 0.75, 1.15, 0.35, 0.6, 2.8, 0.3, 0.25, 8, 0.4, 0.2]
)
# Groups 0..4: men in education buckets 0..4; groups 5..9: women.
_OCCUPATION = alias_table(
    np.vstack([_OCCUPATION_WEIGHTS, _OCCUPATION_WEIGHTS * _FEMALE_OCCUPATION_FACTOR])
)
# Log-income premium of each occupation; Not-working (last) has none.
_OCCUPATION_PREMIUM = np.array(
    [0.05, 0.0, -0.3, 0.0, 0.3, 0.2, -0.25, -0.1, -0.1, -0.25, -0.05, -0.45, 0.05, 0.0, 0.0]
)
_NOT_WORKING = vocab.OCCUPATIONS.index(vocab.NOT_WORKING)

# Chance of working by age: none before 16, most adults of working age, few past 75.
_P_EMPLOYED = np.interp(
    _AGES,
    [0, 15, 16, 18, 22, 25, 55, 62, 67, 72, 80, 100],
    [0, 0, 0.25, 0.55, 0.7, 0.82, 0.8, 0.62, 0.32, 0.18, 0.06, 0.0],
)
_P_PART_TIME = np.interp(_AGES, [18, 24, 25, 60, 66, 100], [0.45, 0.35, 0.15, 0.15, 0.45, 0.6])
_P_MARRIED = np.interp(
    _AGES,
    [0, 17, 18, 22, 30, 40, 55, 65, 75, 85, 100],
    [0, 0, 0.03, 0.12, 0.45, 0.6, 0.63, 0.62, 0.55, 0.4, 0.2],
)
# Widowhood: women are less often still married at old ages.
_FEMALE_MARRIED_FACTOR = np.interp(_AGES, [0, 60, 100], [1.0, 0.95, 0.55])

# Median income of a 48-year-old HS-grad man working 40 hours a week.
_BASE_INCOME = 42_000.0

# Visits per person: 1 to MAX_VISITS, mean 2.37.
_VISIT_COUNT = alias_table([0.35, 0.25, 0.18, 0.12, 0.10])


def _zipf(size: int, exponent: float) -> FloatArray:
    """Zipf-like weights for ``size`` names listed most frequent first."""
    return np.asarray(1.0 / np.arange(1, size + 1) ** exponent, dtype=np.float64)


_FEMALE_NAME = alias_table(_zipf(len(vocab.FEMALE_NAMES), 0.6))
_MALE_NAME = alias_table(_zipf(len(vocab.MALE_NAMES), 0.6))
_SURNAME = alias_table(_zipf(len(vocab.SURNAMES), 0.7))

_FIRST_NAMES = pa.array(vocab.FEMALE_NAMES + vocab.MALE_NAMES, type=pa.string())
_SURNAMES = pa.array(vocab.SURNAMES, type=pa.string())
_SEX_VALUES = pa.array(vocab.SEXES, type=pa.string())
_STATE_VALUES = pa.array(vocab.STATE_CODES, type=pa.string())
_EDUCATION_VALUES = pa.array(vocab.EDUCATION, type=pa.string())
_OCCUPATION_VALUES = pa.array(vocab.OCCUPATIONS, type=pa.string())

# Independent PCG64 streams of one seed, so that a change to one table never shifts another.
GEOGRAPHY_STREAM = 0
PEOPLE_STREAM = 1
VISITS_STREAM = 2

_MIN_ZIPS_PER_STATE = 10
# Sigma of the log-normal ZIP populations within a state: real ZIP sizes are strongly skewed.
_ZIP_SKEW = 1.0


def zip_counts() -> IntArray:
    """Distinct ZIP codes per state (in :data:`vocab.STATES` order), summing to :data:`ZIP_COUNT`.

    Each state gets at least 10, the rest in proportion to population^0.7: the exponent below 1
    gives rural states more ZIP codes per person, as in reality.

    Example:
        >>> counts = zip_counts()
        >>> int(counts.sum()), int(counts.min()), vocab.STATE_CODES[int(counts.argmax())]
        (5000, 28, 'CA')
    """
    raw = np.array([pop for _, pop, _ in vocab.STATES], dtype=np.float64) ** 0.7
    spare = ZIP_COUNT - _MIN_ZIPS_PER_STATE * raw.size
    quota = raw / raw.sum() * spare
    counts = np.floor(quota).astype(np.int64)
    # Largest remainder, with a stable sort so that ties always break the same way.
    order = np.argsort(-(quota - counts), kind="stable")
    counts[order[: spare - int(counts.sum())]] += 1
    return np.asarray(counts + _MIN_ZIPS_PER_STATE, dtype=np.int64)


@dataclass(frozen=True)
class Geography:
    """The ZIP codes of one seed, each with its state, and the distribution of people over them.

    Attributes:
        codes: the 5-digit ZIP codes as Arrow strings, grouped by state.
        state: index into :data:`vocab.STATES` of each code's state.
        people: alias table of the share of the population living in each ZIP code.
    """

    codes: pa.Array
    state: IntArray
    people: AliasTable


def geography(seed: int) -> Geography:
    """Draw each state's ZIP codes inside its real prefix ranges, with skewed populations.

    A state's share of all people is its 2020 population share; within the state, ZIP codes get
    log-normal shares.
    """
    rng = generator(seed, GEOGRAPHY_STREAM)
    counts = zip_counts()
    population = np.array([pop for _, pop, _ in vocab.STATES], dtype=np.float64)
    share = population / population.sum()
    codes: list[IntArray] = []
    states: list[IntArray] = []
    weights: list[FloatArray] = []
    for index, (_, _, ranges) in enumerate(vocab.STATES):
        candidates = np.concatenate(
            [np.arange(low * 100, (high + 1) * 100, dtype=np.int64) for low, high in ranges]
        )
        picked = np.sort(rng.choice(candidates, size=int(counts[index]), replace=False))
        size = rng.lognormal(0.0, _ZIP_SKEW, size=picked.size)
        codes.append(picked)
        states.append(np.full(picked.size, index, dtype=np.int64))
        weights.append(share[index] * size / size.sum())
    # One format call per ZIP code (5,000), not one per row.
    texts = [f"{code:05d}" for code in np.concatenate(codes).tolist()]
    return Geography(
        codes=pa.array(texts, type=pa.string()),
        state=np.concatenate(states),
        people=alias_table(np.concatenate(weights)),
    )


def _take(values: pa.Array, index: IntArray) -> pa.Array:
    return values.take(pa.array(index, type=pa.int64()))


def _dates(days: IntArray) -> pa.Array:
    """Arrow date32 values from days since 1970-01-01."""
    return pa.array(days.astype(np.int32), type=pa.int32()).cast(pa.date32())


def _new_year(year: IntArray) -> IntArray:
    """Days since 1970-01-01 of January 1st of each year."""
    return (year - 1970).astype("datetime64[Y]").astype("datetime64[D]").astype(np.int64)


def people_chunk(rng: np.random.Generator, geo: Geography, first_id: int, size: int) -> pa.Table:
    """Draw ``size`` people with ids ``first_id, first_id + 1, ...`` (schema ``PEOPLE_SCHEMA``)."""
    zip_index = geo.people.sample(rng, size)
    age = _AGE.sample(rng, size)
    female = rng.random(size) < _P_FEMALE[age]

    # REFERENCE_DATE is January 1st, so age a means born from January 2nd of year 2023 - a to
    # January 1st of year 2024 - a, both included.
    latest_birth = _new_year(REFERENCE_DATE.year - age)
    days_in_year = latest_birth - _new_year(REFERENCE_DATE.year - 1 - age)
    date_of_birth = latest_birth - (rng.random(size) * days_in_year).astype(np.int64)

    education = _EDUCATION.sample_given(rng, age)
    bucket = _EDUCATION_BUCKET[education]
    works = rng.random(size) < _p_employed(age, female, bucket)
    hours = _hours(rng, age, female, works)
    occupation = np.where(
        works, _OCCUPATION.sample_given(rng, bucket + 5 * female), _NOT_WORKING
    ).astype(np.int64)
    income = _income(
        rng,
        age=age,
        female=female,
        education=education,
        occupation=occupation,
        hours=hours,
        works=works,
    )
    p_married = _P_MARRIED[age] * np.where(female, _FEMALE_MARRIED_FACTOR[age], 1.0)
    married = rng.random(size) < p_married

    first = np.where(
        female,
        _FEMALE_NAME.sample(rng, size),
        len(vocab.FEMALE_NAMES) + _MALE_NAME.sample(rng, size),
    )
    surname = _SURNAME.sample(rng, size)
    name = pc.binary_join_element_wise(_take(_FIRST_NAMES, first), _take(_SURNAMES, surname), " ")

    columns = [
        pa.array(np.arange(first_id, first_id + size, dtype=np.int64)),
        name,
        _dates(date_of_birth),
        _take(geo.codes, zip_index),
        _take(_STATE_VALUES, geo.state[zip_index]),
        _take(_SEX_VALUES, np.where(female, 0, 1)),
        pa.array(age),
        _take(_EDUCATION_VALUES, education),
        _take(_OCCUPATION_VALUES, occupation),
        pa.array(hours),
        pa.array(income),
        pa.array(married),
    ]
    return pa.Table.from_arrays(columns, schema=PEOPLE_SCHEMA)


def _p_employed(age: IntArray, female: BoolArray, bucket: IntArray) -> FloatArray:
    """Chance of working: by age, raised by schooling, lower for adult women than adult men."""
    adult = age >= 18
    p = _P_EMPLOYED[age] * np.where(adult, _EMPLOYMENT_FACTOR[bucket], 1.0)
    p = p * np.where(adult, np.where(female, 0.88, 1.06), 1.0)
    return np.minimum(p, 0.97)


def _hours(
    rng: np.random.Generator, age: IntArray, female: BoolArray, works: BoolArray
) -> IntArray:
    """Weekly hours: 0 without work; teens part-time; adults part-time, exactly 40, or longer."""
    size = age.size
    p_part = np.where(age < 18, 1.0, _P_PART_TIME[age] + 0.1 * female)
    u = rng.random(size)
    part_time = np.where(age < 18, rng.integers(4, 25, size), rng.integers(8, 35, size))
    # Long weeks thin out exponentially: about 1 in 10 of them is past 57 hours.
    long_hours = np.minimum(np.rint(41 + rng.exponential(7.0, size)), MAX_HOURS).astype(np.int64)
    # Of those not part-time, 55% report exactly 40 hours: the spike every survey shows.
    full_time = np.where(u < p_part + 0.55 * (1 - p_part), 40, long_hours)
    hours = np.where(u < p_part, part_time, full_time)
    return np.where(works, hours, 0).astype(np.int64)


def _income(
    rng: np.random.Generator,
    *,
    age: IntArray,
    female: BoolArray,
    education: IntArray,
    occupation: IntArray,
    hours: IntArray,
    works: BoolArray,
) -> IntArray:
    """Yearly dollars: log-normal wages with a heavy upper tail, pensions, benefits, or nothing."""
    size = age.size
    log_wage = (
        np.log(_BASE_INCOME)
        + _EDUCATION_PREMIUM[education]
        + _OCCUPATION_PREMIUM[occupation]
        - 0.0008 * (age - 48) ** 2
        + np.log(np.maximum(hours, 1) / 40)
        - 0.12 * female
        + rng.normal(0.0, 0.45, size)
        # 4% of earners get an exponential boost: the heavy right tail of real incomes.
        + (rng.random(size) < 0.04) * rng.exponential(0.9, size)
    )
    # Without work: pensions from 62 on (higher with schooling), some benefits from 16 to 61,
    # nothing for children under 16.
    retired = age >= 62
    log_other = np.where(
        retired, np.log(21_000) + 0.4 * _EDUCATION_PREMIUM[education], np.log(9_000)
    ) + rng.normal(0.0, np.where(retired, 0.55, 0.8))
    has_other = (age >= 16) & (rng.random(size) < np.where(retired, 0.9, 0.3))
    income = np.where(works, np.exp(log_wage), np.where(has_other, np.exp(log_other), 0.0))
    return np.asarray(np.rint(np.clip(income, 0, MAX_INCOME)), dtype=np.int64)


def visits_chunk(rng: np.random.Generator, people: pa.Table, first_visit_id: int) -> pa.Table:
    """Draw 1 to 5 visits per person of ``people``, numbered from ``first_visit_id``.

    Each visit repeats its person's id and attributes (``PERSON_ATTRIBUTES``), so the table can be
    queried alone with the person as privacy unit.
    """
    count = _VISIT_COUNT.sample(rng, people.num_rows) + 1
    owner = np.repeat(np.arange(people.num_rows, dtype=np.int64), count)
    size = owner.size
    year = np.array([REFERENCE_DATE.year - 1], dtype=np.int64)
    first_day = int(_new_year(year)[0])
    days = int(_new_year(year + 1)[0]) - first_day
    visit_date = first_day + rng.integers(0, days, size)
    minutes = np.rint(rng.lognormal(np.log(30.0), 0.6, size))
    index = pa.array(owner, type=pa.int64())
    columns = {
        "visit_id": pa.array(np.arange(first_visit_id, first_visit_id + size, dtype=np.int64)),
        "person_id": people.column("person_id").take(index),
        "visit_date": _dates(visit_date),
        "duration_minutes": pa.array(np.clip(minutes, 5, MAX_VISIT_MINUTES).astype(np.int64)),
    }
    for column in PERSON_ATTRIBUTES:
        columns[column] = people.column(column).take(index)
    return pa.Table.from_pydict(columns, schema=VISITS_SCHEMA)
