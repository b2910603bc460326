"""The anonymisation config file (TOML): data, attribute roles, privacy models and hierarchies.

Example (``docs/anonymity/adult.toml`` is a complete one)::

    [data]
    path = "adult.csv"              # or: catalog = "census.toml" and table = "people"

    [attributes]
    identifiers = ["name"]          # dropped from every release
    quasi_identifiers = ["age", "zip", "marital_status"]
    sensitive = ["disease"]          # every other column is released as it is

    [privacy]
    k = 5
    l = 2                            # distinct ℓ-diversity
    t = 0.2
    suppression_limit = 0.01

    [anonymize]
    algorithm = "lattice"            # or "mondrian"
    metric = "ncp"

    [hierarchies.age]
    type = "intervals"
    widths = [5, 10, 20]
    top = 80

    [hierarchies.zip]
    type = "mask"
    masked = [1, 2]

    [hierarchies.marital_status]
    type = "tree"
    values = { "Never-married" = ["Not married"], "Divorced" = ["Not married"] }

Relative paths are read from the config file's folder. Every error names the file, and the section,
column or value at fault.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dalenius.anonymity.anonymize import Release, anonymize
from dalenius.anonymity.hierarchy import Hierarchy, HierarchyError
from dalenius.anonymity.lattice import Progress
from dalenius.anonymity.models import (
    AlphaKAnonymity,
    BetaLikeness,
    DeltaDisclosure,
    DistinctLDiversity,
    EntropyLDiversity,
    KAnonymity,
    Model,
    RecursiveCLDiversity,
    TCloseness,
)
from dalenius.core.errors import ConfigurationError, UserError

SECTIONS = ("data", "attributes", "privacy", "anonymize", "hierarchies")
DATA_KEYS = ("path", "catalog", "table")
ATTRIBUTE_KEYS = ("identifiers", "quasi_identifiers", "sensitive", "ordered")
PRIVACY_KEYS = (
    "k",
    "l",
    "entropy_l",
    "recursive",
    "t",
    "alpha",
    "beta",
    "delta",
    "suppression_limit",
)
ANONYMIZE_KEYS = ("algorithm", "metric", "mondrian")
HIERARCHY_TYPES = ("tree", "intervals", "dates", "mask", "ordered", "identity")
"""Every key the config may use (the docs test checks each is documented)."""


@dataclass
class Config:
    """A parsed anonymisation config."""

    data: Any
    identifiers: tuple[str, ...]
    quasi_identifiers: tuple[str, ...]
    sensitive: tuple[str, ...]
    ordered: tuple[str, ...] | None
    models: tuple[Model, ...]
    suppression_limit: float
    algorithm: str = "lattice"
    metric: str = "ncp"
    mondrian: str = "strict"
    hierarchies: dict[str, Hierarchy] = field(default_factory=dict)
    file: str = "<config>"

    def release(self, data: Any, *, progress: Progress | None = None) -> Release:
        """Anonymise ``data`` as this config says (see :func:`dalenius.anonymity.anonymize`)."""
        return anonymize(
            data,
            quasi_identifiers=self.quasi_identifiers,
            models=self.models,
            sensitive=self.sensitive,
            identifiers=self.identifiers,
            hierarchies=self.hierarchies,
            suppression_limit=self.suppression_limit,
            metric=self.metric,
            algorithm=self.algorithm,
            mondrian=self.mondrian,
            ordered=self.ordered,
            progress=progress,
        )


def load_config(path: str | Path) -> Config:
    """Read and validate an anonymisation config file.

    Raises:
        ConfigurationError: naming the file and the key at fault.
        HierarchyError: naming the file, the column and the value.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigurationError(
            f"the config file {str(path)!r} does not exist.",
            fix="pass the path of an anonymisation TOML file (see docs/anonymity/config.md).",
        ) from None
    return parse_config(text, file=str(path), base_dir=path.resolve().parent)


def parse_config(text: str, *, file: str = "<config>", base_dir: Path | None = None) -> Config:
    """Validate config TOML text (see the module docstring)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _err(file, f"the file is not valid TOML: {exc}.") from None
    return config_from_dict(doc, file=file, base_dir=base_dir)


def config_from_dict(
    doc: Mapping[str, Any], *, file: str = "<config>", base_dir: Path | None = None
) -> Config:
    """Validate a config already parsed (TOML, or the same document sent as JSON)."""
    if not isinstance(doc, Mapping):
        raise _err(file, "the config must be a table of sections.")
    doc = dict(doc)
    _known(file, "the top level", doc, SECTIONS)
    data = _data(file, doc.get("data"), base_dir)
    attrs = _section(file, doc, "attributes")
    _known(file, "[attributes]", attrs, ATTRIBUTE_KEYS)
    qis = _names(file, attrs, "quasi_identifiers", required=True)
    privacy = _section(file, doc, "privacy")
    _known(file, "[privacy]", privacy, PRIVACY_KEYS)
    anonymize = _section(file, doc, "anonymize")
    _known(file, "[anonymize]", anonymize, ANONYMIZE_KEYS)
    ordered = _names(file, attrs, "ordered") if "ordered" in attrs else None
    hier_doc = doc.get("hierarchies", {})
    if not isinstance(hier_doc, dict):
        raise _err(file, "[hierarchies] must be a table of [hierarchies.COLUMN] sections.")
    hierarchies = {col: hierarchy_from_dict(col, spec, file=file) for col, spec in hier_doc.items()}
    limit = privacy.get("suppression_limit", 0.0)
    try:
        models = models_from_dict(privacy)
    except UserError as exc:
        raise _err(file, f"[privacy]: {exc.what}", fix=exc.fix) from None
    return Config(
        data=data,
        identifiers=_names(file, attrs, "identifiers"),
        quasi_identifiers=qis,
        sensitive=_names(file, attrs, "sensitive"),
        ordered=ordered,
        models=models,
        suppression_limit=limit,
        algorithm=str(anonymize.get("algorithm", "lattice")),
        metric=str(anonymize.get("metric", "ncp")),
        mondrian=str(anonymize.get("mondrian", "strict")),
        hierarchies=hierarchies,
        file=file,
    )


def models_from_dict(privacy: Mapping[str, Any]) -> tuple[Model, ...]:
    """The privacy models named in a ``[privacy]``-style mapping."""
    models: list[Model] = []
    k = privacy.get("k")
    if "alpha" in privacy:
        models.append(AlphaKAnonymity(privacy["alpha"], k if k is not None else 1))
    if k is not None:
        models.append(KAnonymity(k))
    if "l" in privacy:
        models.append(DistinctLDiversity(privacy["l"]))
    if "entropy_l" in privacy:
        models.append(EntropyLDiversity(privacy["entropy_l"]))
    if "recursive" in privacy:
        rec = privacy["recursive"]
        if not isinstance(rec, dict) or set(rec) != {"c", "l"}:
            raise ConfigurationError(
                f"recursive must be an inline table with c and l; got {rec!r}.",
                fix="write recursive = { c = 3, l = 2 }.",
            )
        models.append(RecursiveCLDiversity(rec["c"], rec["l"]))
    if "t" in privacy:
        models.append(TCloseness(privacy["t"]))
    if "beta" in privacy:
        models.append(BetaLikeness(privacy["beta"]))
    if "delta" in privacy:
        models.append(DeltaDisclosure(privacy["delta"]))
    if not models:
        raise ConfigurationError(
            "no privacy model is requested.",
            fix="add k = 5 (and optionally l, entropy_l, recursive, t, alpha, beta, delta).",
        )
    return tuple(models)


def hierarchy_from_dict(column: str, spec: Any, *, file: str | None = None) -> Hierarchy:
    """A hierarchy from its TOML declaration (``type`` and that type's parameters)."""
    if not isinstance(spec, dict):
        raise HierarchyError("a hierarchy must be a table with a type.", column=column, file=file)
    kind = spec.get("type")
    params = {k: v for k, v in spec.items() if k != "type"}
    allowed = {
        "tree": {"values"},
        "intervals": {"widths", "top", "bottom", "origin"},
        "dates": {"levels"},
        "mask": {"masked"},
        "ordered": {"order", "sizes"},
        "identity": set(),
    }
    if kind not in allowed:
        raise HierarchyError(
            f"unknown hierarchy type {kind!r}.",
            column=column,
            file=file,
            fix=f"use one of {', '.join(HIERARCHY_TYPES)}.",
        )
    unknown = set(params) - allowed[kind]
    if unknown:
        raise HierarchyError(
            f"unknown key(s) {sorted(unknown)} for a {kind} hierarchy.",
            column=column,
            file=file,
            fix=f"a {kind} hierarchy takes {', '.join(sorted(allowed[kind])) or 'no keys'}.",
        )
    try:
        if kind == "tree":
            values = params.get("values")
            if not isinstance(values, dict):
                raise HierarchyError(
                    "a tree needs values = { value = [level1, level2, ...], ... }."
                )
            built = Hierarchy.tree(values)
        elif kind == "intervals":
            built = Hierarchy.intervals(
                params.get("widths", []),
                top=params.get("top"),
                bottom=params.get("bottom"),
                origin=params.get("origin", 0),
            )
        elif kind == "dates":
            built = Hierarchy.dates(params.get("levels", ("month", "year")))
        elif kind == "mask":
            built = Hierarchy.mask(params.get("masked", (1, 2)))
        elif kind == "ordered":
            built = Hierarchy.ordered(params.get("order", []), params.get("sizes", []))
        else:
            built = Hierarchy.identity()
    except HierarchyError as exc:
        raise HierarchyError(
            exc.what.split(": ", 1)[-1], column=column, value=exc.value, file=file, fix=exc.fix
        ) from None
    return built.located(file) if file else built


def _data(file: str, doc: Any, base_dir: Path | None) -> Any:
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise _err(file, "[data] must be a table.")
    _known(file, "[data]", doc, DATA_KEYS)
    if "path" in doc:
        return _resolve(doc["path"], base_dir)
    if "catalog" in doc:
        from dalenius.core.catalog import load_catalog

        catalog = load_catalog(_resolve(doc["catalog"], base_dir))
        name = doc.get("table")
        table = catalog.table(str(name)) if name else None
        if table is None:
            raise _err(
                file,
                f"[data] table {name!r} is not in the catalog (it has {', '.join(catalog.table_names)}).",
                fix='write table = "NAME".',
            )
        return table
    raise _err(file, "[data] needs path, or catalog and table.")


def _resolve(raw: Any, base_dir: Path | None) -> Path:
    path = Path(str(raw)).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    return path


def _section(file: str, doc: dict[str, Any], name: str) -> dict[str, Any]:
    section = doc.get(name, {})
    if not isinstance(section, dict):
        raise _err(file, f"[{name}] must be a table.")
    return section


def _names(file: str, doc: dict[str, Any], key: str, *, required: bool = False) -> tuple[str, ...]:
    raw = doc.get(key, [])
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise _err(file, f"[attributes] {key} must be a list of column names.")
    if required and not raw:
        raise _err(
            file,
            f"[attributes] {key} is missing or empty.",
            fix='write quasi_identifiers = ["age", "zip"].',
        )
    return tuple(raw)


def _known(file: str, where: str, doc: dict[str, Any], keys: tuple[str, ...]) -> None:
    unknown = set(doc) - set(keys)
    if unknown:
        raise _err(
            file, f"unknown key(s) {sorted(unknown)} in {where}.", fix=f"use {', '.join(keys)}."
        )


def _err(file: str, what: str, *, fix: str | None = None) -> ConfigurationError:
    return ConfigurationError(f"{file}: {what}", fix=fix)
