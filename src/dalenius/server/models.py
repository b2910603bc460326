"""The HTTP API's request and response shapes, which FastAPI publishes as the OpenAPI document.

Requests are strict (unknown fields are refused, so a misspelt ``epsilon`` cannot silently fall
back to something else). Responses mirror the library's own JSON forms
(:meth:`~dalenius.engine.result.Result.to_dict`, :meth:`~dalenius.plan.explain.Explanation.to_dict`,
:meth:`~dalenius.core.errors.UserError.to_dict`) and allow extra fields, so a field the library
adds later reaches clients without a change here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

Number = Annotated[
    StrictFloat | StrictInt | StrictStr,
    Field(
        description='A number, or exact ASCII decimal or fraction text ("0.1", "1e-6", '
        '"1/10"); zero, or between 1e-30 and 1e6.',
        examples=[0.1, "1/10"],
    ),
]
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$"
TEXT_PATTERN = r"^[^\x00]*$"
"""Text fields refuse NUL characters, which no database column of the ledger can store."""


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Response(BaseModel):
    model_config = ConfigDict(extra="allow")


# -- errors ---------------------------------------------------------------------------------


class ErrorDetail(_Response):
    """What went wrong, why, and how to fix it (SQL errors add clause, line, column, span)."""

    code: str
    message: str
    why: str | None = None
    fix: str | None = None
    request_id: str
    clause: str | None = None
    line: int | None = None
    column: int | None = None
    span: str | None = None


class ErrorResponse(BaseModel):
    """The body of every non-success answer."""

    error: ErrorDetail


# -- requests -------------------------------------------------------------------------------


class ExplainRequest(_Request):
    """A query to explain: its plan, cost and expected errors, before spending anything."""

    sql: str = Field(
        min_length=1,
        max_length=20_000,
        pattern=TEXT_PATTERN,
        examples=["SELECT COUNT(*) FROM people"],
    )
    epsilon: Number | None = Field(
        default=None,
        description="The ε to spend; may instead be given in the SQL "
        "(SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = ...)).",
    )
    delta: Number | None = Field(
        default=None,
        description="The δ to spend; needed only to GROUP BY columns without public keys.",
    )
    confidence: float | None = Field(
        default=None, gt=0, lt=1, description="Confidence of the error bars (default 0.95)."
    )
    target_error: Number | dict[str, Number] | None = Field(
        default=None,
        description="Instead of epsilon (accuracy first): the error (half-width of the interval "
        "at the confidence) to meet on every COUNT and SUM, or an object of errors by output "
        "column; the smallest ε that meets it is spent.",
        examples=[50, {"n": 50}],
    )
    target_relative: Number | None = Field(
        default=None,
        description="Instead of epsilon: a relative error such as 0.05, relative to expected.",
    )
    expected: Number | dict[str, Number] | None = Field(
        default=None,
        description="With target_relative: the magnitude the analyst expects (a number, or an "
        "object by output column); the true value is private.",
    )

    def targets(self) -> dict[str, Any]:
        """The accuracy-first keyword arguments of the session."""
        return {
            "target_error": self.target_error,
            "target_relative": self.target_relative,
            "expected": self.expected,
        }


class BatchQuery(_Request):
    """One query of a batch, with its target."""

    sql: str = Field(min_length=1, max_length=20_000, pattern=TEXT_PATTERN)
    target_error: Number | dict[str, Number] | None = None
    target_relative: Number | None = None
    expected: Number | dict[str, Number] | None = None


class BatchRequest(_Request):
    """Several queries with error targets: one budget split optimally (docs/accuracy.md)."""

    queries: list[BatchQuery] = Field(min_length=1, max_length=20)
    epsilon: Number | None = Field(
        default=None,
        description="The total ε to split; without it every query gets its smallest ε.",
    )
    delta: Number | None = None
    confidence: float | None = Field(default=None, gt=0, lt=1)
    run: bool = Field(
        default=False, description="Answer the queries (spends); by default only plan them."
    )


class QueryRequest(ExplainRequest):
    """A query to answer, spending ``epsilon`` from the caller's budget."""

    idempotency_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=TEXT_PATTERN,
        description="Retry key: a retried request with the same key is charged once.",
    )


class FloorRequest(_Request):
    """A dataset's own floor on the ε of one query."""

    epsilon: Number = Field(description="the smallest epsilon one query may spend")


class LossRequest(_Request):
    """A loss: ``epsilon`` (pure DP), ``epsilon`` and ``delta`` ((ε, δ)-DP), or ``rho`` (zCDP)."""

    epsilon: Number | None = None
    delta: Number | None = None
    rho: Number | None = None


class FailClosedRequest(_Request):
    """Whether a failure after the data gate also exhausts the analyst's budget on the dataset."""

    fail_closed: bool


class BudgetRequest(LossRequest):
    """An analyst's budget on a dataset, optionally renewed every ``refresh_days`` days."""

    refresh_days: int | None = Field(default=None, ge=1, le=36_500)


class RegisterRequest(_Request):
    """A dataset to register, by the path of its catalog file on the server."""

    catalog: str = Field(
        min_length=1,
        max_length=4096,
        pattern=TEXT_PATTERN,
        examples=["dalenius-demo/census.toml"],
    )
    definition: Literal["pure", "approx", "zcdp"] | None = Field(
        default=None, description="How losses are added up on this dataset (default: pure)."
    )
    total_cap: LossRequest | None = Field(
        default=None, description="A cap on every analyst's losses on this dataset together."
    )


class PrincipalRequest(_Request):
    """An analyst or curator to create."""

    name: str = Field(pattern=NAME_PATTERN, examples=["alice"])
    role: Literal["analyst", "curator"] = "analyst"
    issue_token: bool = Field(default=True, description="Issue a first token (shown once).")
    label: str = Field(
        default="", max_length=200, pattern=TEXT_PATTERN, description="A note on the first token."
    )
    expires_in_days: int | None = Field(
        default=None,
        ge=1,
        le=3650,
        description="The first token stops working after this many days.",
    )


class TokenRequest(_Request):
    """A new token for a principal."""

    label: str = Field(default="", max_length=200, pattern=TEXT_PATTERN, examples=["laptop"])
    expires_in_days: int | None = Field(
        default=None,
        ge=1,
        le=3650,
        description="The token stops working after this many days (default: when revoked).",
    )


# -- responses ------------------------------------------------------------------------------


class Loss(_Response):
    """A loss as floats for people and exact fractions for machines."""

    epsilon: float | None = None
    epsilon_exact: str | None = None
    delta: float | None = None
    delta_exact: str | None = None
    rho: float | None = None
    rho_exact: str | None = None


class Bounds(_Response):
    """A numeric column's public clipping range."""

    low: float
    high: float


class ColumnInfo(_Response):
    """A column's public metadata."""

    name: str
    type: str
    bounds: Bounds | None
    bounds_epsilon: float | None = Field(
        default=None,
        description='Set when the catalog says bounds = "private": what choosing them costs '
        "(the caller's first query that needs them pays it once per data version).",
    )
    keys: list[str | int | bool] | None
    nullable: bool
    join_rows_per_key: int | None = Field(
        default=None,
        description="Set when two private tables may be joined on this column: the most rows "
        "sharing one value each side keeps before the join.",
    )
    per_unit: bool = Field(
        default=False,
        description="The custodian says the column holds one value per privacy unit (an "
        "attribute of the person on each of their rows); it only speeds up bounding.",
    )
    description: str


class PrivacyUnitInfo(_Response):
    """What one privacy unit is in a table: a row, or every row sharing an id."""

    kind: Literal["row", "id"]
    description: str
    column: str | None = None
    max_rows: int | None = None
    max_groups: int | None = None
    through: str | None = Field(
        default=None,
        description="When the table does not store its unit: the key that leads to it, "
        "as `l_orderkey = orders.o_orderkey` (each row belongs to the unit of the row of "
        "`orders` whose `o_orderkey` equals its `l_orderkey`).",
    )


class TableInfo(_Response):
    """A table's public metadata."""

    name: str
    description: str
    public: bool
    privacy_unit: PrivacyUnitInfo
    columns: list[ColumnInfo]


class DatasetSummary(_Response):
    """A dataset in a listing (``catalog`` and ``registered_by`` for curators only)."""

    name: str
    description: str
    tables: list[str]
    available: bool
    problem: str | None
    registered_at: str
    catalog: str | None = None
    registered_by: str | None = None


class DatasetDetail(DatasetSummary):
    """A dataset with its tables' public metadata (never data)."""

    tables: list[TableInfo]  # type: ignore[assignment]


class DatasetList(BaseModel):
    """The datasets the caller may see."""

    datasets: list[DatasetSummary]


class Measurement(_Response):
    """One noisy measurement in an explanation."""

    name: str
    aggregate: str
    sensitivity: float
    epsilon: float
    epsilon_exact: str
    noise_scale: float
    error: float
    lower_bound: float | None = Field(
        default=None,
        description="γ: no (ε, δ)-DP mechanism has a worst-case mean absolute error below it on "
        "this measurement's answers (course document 004, Theorem 4); null where the theorem "
        "does not apply (a selection's rank error).",
    )
    mechanism: str


class Explanation(_Response):
    """A query's plan, cost and expected errors (see ``dalenius explain``)."""

    dataset: str
    table: str
    privacy_unit: str
    filters: list[str]
    bounding: str = Field(
        default="",
        description="The contribution bounding every sensitivity rests on "
        "(BoundContributions: rows and groups per privacy unit).",
    )
    clips: list[str] = Field(
        default=[], description="Each aggregated argument's clipping to its public bounds (Clip)."
    )
    groups: list[dict[str, Any]]
    measurements: list[Measurement]
    outputs: list[dict[str, Any]]
    loss: Loss
    confidence: float
    exact_sql: str
    notes: list[str] = []
    lower_bound_basis: str = Field(
        default="", description="What each measurement's lower_bound means, with its citation."
    )
    accuracy: dict[str, Any] | None = Field(
        default=None, description="With a target: how ε was chosen (docs/accuracy.md)."
    )


class BatchResult(_Response):
    """A batch's plan (and, when run, its answers)."""

    dataset: str
    epsilon: float
    epsilon_exact: str
    scale: float
    budget: float | None
    queries: list[dict[str, Any]]
    results: list[dict[str, Any]] = []


class Cell(_Response):
    """One value with its error bar (``low`` and ``high`` are null for group keys)."""

    value: Any
    low: Any
    high: Any


class QueryResult(_Response):
    """A released answer: rows of cells, the loss, what was spent and what remains."""

    dataset: str
    columns: list[str]
    kinds: list[str]
    rows: list[list[Cell]]
    confidence: float
    loss: Loss
    spent: Loss
    remaining: Loss
    cached: bool
    shared: bool = False
    entry_id: str | None
    accuracy: dict[str, Any] | None = None


class Budget(_Response):
    """An analyst's budget on a dataset (null when none was set: nothing may be spent)."""

    analyst: str
    dataset: str
    definition: str
    budget: Loss | None
    refresh_days: int | None
    spent: Loss
    remaining: Loss


class BudgetList(BaseModel):
    """Budgets with what was spent and what remains."""

    budgets: list[Budget]


class Accounting(_Response):
    """A dataset's accounting definition, its total cap and what all analysts spent together."""

    dataset: str
    definition: str
    total_cap: Loss | None
    total_spent: Loss
    min_epsilon: float | None = Field(
        default=None,
        description="the smallest epsilon one query may spend on this dataset (the gateway's "
        "min_epsilon, or the dataset's own floor if higher)",
    )
    fail_closed: bool = Field(
        description="whether a failure after the data gate also exhausts that analyst's budget"
    )
    failures: int = Field(
        description="requests that failed after the data gate (charged; the engine's messages "
        "are in the audit trail)"
    )


class LedgerEntry(_Response):
    """One charge in the ledger."""

    id: str
    analyst: str
    dataset: str
    sql: str
    plan_hash: str
    status: str
    loss: Loss
    charged: Loss
    created_at: str
    finished_at: str | None
    detail: str


class LedgerList(BaseModel):
    """Ledger entries, newest first."""

    entries: list[LedgerEntry]


class AuditLine(_Response):
    """One line of the ledger's audit trail."""

    seq: int
    at: str
    analyst: str
    dataset: str
    sql: str
    outcome: str
    loss: Loss | None
    detail: str
    entry_id: str | None


class AuditList(BaseModel):
    """The audit trail, newest first."""

    audit: list[AuditLine]


class RequestLine(_Response):
    """One line of the gateway's request log."""

    at: str
    request_id: str
    principal: str
    token_id: str
    client: str
    method: str
    path: str
    status: int
    code: str
    millis: float


class RequestList(BaseModel):
    """The request log, newest first."""

    requests: list[RequestLine]


class TokenInfo(_Response):
    """A token's public record (never its secret)."""

    id: str
    label: str
    created_at: str
    revoked_at: str | None
    expires_at: str | None = None
    expired: bool = False


class IssuedToken(_Response):
    """A new token: ``token`` is shown this once."""

    principal: str
    token_id: str
    token: str
    note: str
    expires_at: str | None = None


class PrincipalInfo(_Response):
    """An analyst or curator, with the datasets granted and their tokens."""

    name: str
    role: str
    created_at: str
    created_by: str
    grants: list[str]
    tokens: list[TokenInfo]


class CreatedPrincipal(PrincipalInfo):
    """A new principal, with its first token if one was issued."""

    token: IssuedToken | None


class PrincipalList(BaseModel):
    """Every principal."""

    principals: list[PrincipalInfo]


class PostgresListener(BaseModel):
    """Where PostgreSQL clients (psql, JDBC, BI tools) reach this gateway (docs/clients.md)."""

    host: str
    port: int
    tls: bool


class Me(BaseModel):
    """Who the caller is and which datasets they may use."""

    name: str
    role: str
    token_id: str
    datasets: list[str]
    postgres: PostgresListener | None = None


class DensityRequest(_Request):
    """A density curve (one column) or surface (two) to release with the Gaussian-process mechanism."""

    table: str = Field(min_length=1, max_length=200, pattern=TEXT_PATTERN, examples=["people"])
    columns: list[Annotated[str, Field(min_length=1, max_length=200, pattern=TEXT_PATTERN)]] = (
        Field(min_length=1, max_length=2, examples=[["age"]])
    )
    bandwidth: float = Field(
        gt=0, le=1e12, description="The kernel's bandwidth, in the column's units."
    )
    points: int | None = Field(default=None, ge=2, le=4096, description="Grid points per axis.")
    where: str | None = Field(default=None, max_length=20_000, pattern=TEXT_PATTERN)
    epsilon: Number | None = None
    delta: Number | None = Field(
        default=None, description="Required with epsilon: the noise is Gaussian."
    )
    rho: Number | None = Field(
        default=None, description="Instead of epsilon and delta, on a zCDP dataset."
    )
    confidence: float | None = Field(default=None, gt=0, lt=1)
    idempotency_key: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=TEXT_PATTERN
    )


class BoundsRequest(_Request):
    """A numeric column whose clipping bounds to choose privately."""

    table: str = Field(min_length=1, max_length=200, pattern=TEXT_PATTERN, examples=["people"])
    column: str = Field(min_length=1, max_length=200, pattern=TEXT_PATTERN, examples=["income"])
    epsilon: Number | None = Field(
        default=None,
        description='Leave out for a column declared bounds = "private": its bounds_epsilon.',
    )
    idempotency_key: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=TEXT_PATTERN
    )


class HierarchyRequest(_Request):
    """Counts at every level of a hierarchy of key columns, released consistent."""

    table: str = Field(min_length=1, max_length=200, pattern=TEXT_PATTERN, examples=["people"])
    levels: list[Annotated[str, Field(min_length=1, max_length=200, pattern=TEXT_PATTERN)]] = Field(
        min_length=1, max_length=8, examples=[["state", "education"]]
    )
    where: str | None = Field(default=None, max_length=20_000, pattern=TEXT_PATTERN)
    split: list[Annotated[float, Field(gt=0, le=1e6)]] | None = Field(default=None, max_length=9)
    epsilon: Number | None = None
    delta: Number | None = None
    rho: Number | None = None
    confidence: float | None = Field(default=None, gt=0, lt=1)
    idempotency_key: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=TEXT_PATTERN
    )


class ContinualRequest(_Request):
    """The next publication of a continual series (counts, optionally clipped sums, per period)."""

    table: str = Field(min_length=1, max_length=200, pattern=TEXT_PATTERN, examples=["events"])
    time: str = Field(min_length=1, max_length=200, pattern=TEXT_PATTERN, examples=["day"])
    period: Literal["day", "week", "month"] = Field(examples=["day"])
    start: str = Field(
        min_length=10, max_length=10, pattern=r"^\d{4}-\d{2}-\d{2}$", examples=["2024-01-01"]
    )
    horizon: int = Field(ge=1, le=1024, description="Periods the series will ever publish.")
    max_rows: int | None = Field(
        default=None, ge=1, le=1_000_000, description="Rows of one unit counted over the horizon."
    )
    value: str | None = Field(default=None, min_length=1, max_length=200, pattern=TEXT_PATTERN)
    levels: int | None = Field(
        default=None, ge=1, le=11, description="Keep the tree's lowest levels (1: per period)."
    )
    as_of: str | None = Field(
        default=None,
        min_length=10,
        max_length=10,
        pattern=r"^\d{4}-\d{2}-\d{2}$",
        description="Publish the periods closed by this day (default today, UTC).",
    )
    epsilon: Number = Field(description="The series' lifetime ε, charged at its first publication.")
    confidence: float | None = Field(default=None, gt=0, lt=1)


class SynthesizeRequest(_Request):
    """Synthetic rows of a table with MST or AIM (every column with public keys or bounds by
    default); ``degree`` is AIM's workload (every 2-way or 3-way marginal).
    """

    table: str = Field(min_length=1, max_length=200, pattern=TEXT_PATTERN, examples=["people"])
    columns: (
        list[Annotated[str, Field(min_length=1, max_length=200, pattern=TEXT_PATTERN)]] | None
    ) = Field(default=None, min_length=1, max_length=64)
    bins: int = Field(default=10, ge=2, le=1000)
    rows: int | None = Field(default=None, ge=0, le=1_000_000)
    where: str | None = Field(default=None, max_length=20_000, pattern=TEXT_PATTERN)
    method: Literal["mst", "aim"] = "mst"
    degree: int | None = Field(default=None, ge=2, le=3)
    epsilon: Number | None = None
    delta: Number | None = None
    rho: Number | None = None
    idempotency_key: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=TEXT_PATTERN
    )


class OnTheMapRequest(_Request):
    """Synthetic origin–destination rows (OnTheMap's Multinomial–Dirichlet synthesizer, pure ε)."""

    table: str = Field(min_length=1, max_length=200, pattern=TEXT_PATTERN, examples=["people"])
    origin: str = Field(min_length=1, max_length=200, pattern=TEXT_PATTERN, examples=["state"])
    destination: str = Field(
        min_length=1, max_length=200, pattern=TEXT_PATTERN, examples=["education"]
    )
    epsilon: Number | None = None
    delta: Number | None = None
    prior: Number | None = None
    per_destination: int | None = Field(default=None, ge=1, le=1_000_000)
    count_epsilon: Number | None = None
    where: str | None = Field(default=None, max_length=20_000, pattern=TEXT_PATTERN)
    idempotency_key: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=TEXT_PATTERN
    )


ColumnName = Annotated[str, Field(min_length=1, max_length=200, pattern=TEXT_PATTERN)]


class PerturbRequest(_Request):
    """Every row of a table (unit: one row) released with each value of ``columns`` perturbed:
    record perturbation with course document 004's (ε, δ) calibration, pure ε or (ε, δ).
    """

    table: str = Field(min_length=1, max_length=200, pattern=TEXT_PATTERN, examples=["people"])
    columns: list[ColumnName] = Field(
        min_length=1,
        max_length=64,
        examples=[["age", "sex"]],
        description="Numeric columns with public bounds (Laplace noise) or categorical ones with "
        "public keys (the discrete mechanism).",
    )
    tight: bool = Field(
        default=False,
        description="Calibrate with diam/(ε − 2·ln(1−δ)) instead of the course's bound.",
    )
    epsilon: Number | None = None
    delta: Number | None = None
    confidence: float | None = Field(default=None, gt=0, lt=1)
    idempotency_key: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=TEXT_PATTERN
    )


class AnonymityCheckRequest(_Request):
    """Syntactic anonymity of a table as it is: the largest k, ℓ, the smallest t, … and risks."""

    table: str = Field(min_length=1, max_length=200, pattern=TEXT_PATTERN, examples=["people"])
    quasi_identifiers: list[ColumnName] = Field(min_length=1, max_length=64, examples=[["age"]])
    sensitive: list[ColumnName] = Field(default_factory=list, max_length=16)


class AnonymizeRequest(_Request):
    """A table released anonymised: the config of ``dalenius anonymize`` as JSON, minus [data]."""

    table: str = Field(min_length=1, max_length=200, pattern=TEXT_PATTERN, examples=["people"])
    attributes: dict[str, Any] = Field(
        examples=[{"quasi_identifiers": ["age", "sex"], "identifiers": ["name"]}]
    )
    privacy: dict[str, Any] = Field(default_factory=dict, examples=[{"k": 5}])
    anonymize: dict[str, Any] = Field(default_factory=dict, examples=[{"algorithm": "lattice"}])
    hierarchies: dict[str, Any] = Field(
        default_factory=dict, examples=[{"age": {"type": "intervals", "widths": [5, 10, 20]}}]
    )
    rows: int | None = Field(default=None, ge=0, le=10_000_000)


class AttackRequest(_Request):
    """One run of the attack lab: its targets, their ε, and the experiment's sizes (capped)."""

    against: list[Annotated[str, Field(max_length=40, pattern=TEXT_PATTERN)]] | None = Field(
        default=None, max_length=5, examples=[["raw", "naive", "dalenius"]]
    )
    epsilon: Number | None = None
    budget: Number | None = None
    people: int | None = Field(default=None, ge=0, le=10_000_000)
    trials: int | None = Field(default=None, ge=0, le=10_000_000)
    asks: int | None = Field(default=None, ge=0, le=10_000_000)
    queries: int | None = Field(default=None, ge=0, le=10_000_000)
    seed: int | None = Field(default=None, ge=0, le=2**31 - 1)
    k: int = Field(default=5, ge=1, le=1_000)
    l: int = Field(default=3, ge=1, le=100)  # noqa: E741 - the literature's name
    t: float = Field(default=0.2, gt=0, le=1)
    plot: bool = True
