r"""The shadow catalog: what a PostgreSQL client's introspection sees, built from public metadata.

psql's ``\d``, a JDBC driver's ``getTables``/``getColumns``, SQLAlchemy's start-up queries and
a BI tool's schema browser all read ``pg_catalog`` and ``information_schema``. The gateway
answers them from an in-memory DuckDB that holds, per dataset, only what the catalog declares
public: an *empty* table for each of its tables (so ``information_schema`` describes them) and
its own copies of the ``pg_catalog`` tables clients read, filled from the catalog's tables,
columns, types and descriptions. No data file is opened, no row is counted — ``reltuples`` is
``-1`` ("unknown"), as PostgreSQL reports a table never analysed — and nothing is spent.

Catalog tables the gateway has nothing to put in (policies, inheritance, publications,
constraints, indexes, triggers …) exist and are empty, which is the truth: a dataset's tables
have none.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from dalenius.core.catalog import Catalog, Column
from dalenius.core.errors import QueryError
from dalenius.sql.wire import SHADOW_SCHEMA, shadow_sql

VERSION = "PostgreSQL 16.0 (Dalenius differential-privacy gateway)"
"""What ``SELECT version()`` answers: clients parse the leading version number."""
SERVER_VERSION = "16.0"

SERVER_SETTINGS = {
    "server_version": SERVER_VERSION,
    "server_version_num": "160000",
    "server_encoding": "UTF8",
    "integer_datetimes": "on",
    "max_identifier_length": "63",
    "max_index_keys": "32",
    "max_function_args": "100",
    "block_size": "8192",
    "lc_collate": "C",
    "lc_ctype": "C",
}
"""Fixed settings of the listener, as ``pg_settings`` and ``SHOW`` report them."""

NAMESPACE_OID = 2200
"""``public``'s OID in PostgreSQL; the dataset's tables live there."""
CATALOG_NAMESPACE_OID = 11
INFO_NAMESPACE_OID = 13000
FIRST_TABLE_OID = 16384
"""PostgreSQL's first OID for user objects."""

TYPES: dict[str, tuple[int, str, str, int]] = {
    # catalog type: (type OID, PostgreSQL name, DuckDB type, length)
    "int": (20, "bigint", "BIGINT", 8),
    "float": (701, "double precision", "DOUBLE", 8),
    "str": (25, "text", "VARCHAR", -1),
    "bool": (16, "boolean", "BOOLEAN", 1),
    "date": (1082, "date", "DATE", 4),
}
"""How each catalog column type appears to PostgreSQL clients."""

BUILTIN_TYPES: tuple[tuple[int, str, int, str], ...] = (
    # (OID, name, length, category)
    (16, "bool", 1, "B"),
    (17, "bytea", -1, "U"),
    (18, "char", 1, "Z"),
    (19, "name", 64, "S"),
    (20, "int8", 8, "N"),
    (21, "int2", 2, "N"),
    (23, "int4", 4, "N"),
    (25, "text", -1, "S"),
    (26, "oid", 4, "N"),
    (700, "float4", 4, "N"),
    (701, "float8", 8, "N"),
    (1042, "bpchar", -1, "S"),
    (1043, "varchar", -1, "S"),
    (1082, "date", 4, "D"),
    (1114, "timestamp", 8, "D"),
    (1184, "timestamptz", 8, "D"),
    (1700, "numeric", -1, "N"),
    (2205, "regclass", 4, "N"),
    (2206, "regtype", 4, "N"),
)

FORMAT_NAMES = {
    16: "boolean",
    17: "bytea",
    18: '"char"',
    19: "name",
    20: "bigint",
    21: "smallint",
    23: "integer",
    25: "text",
    26: "oid",
    700: "real",
    701: "double precision",
    1042: "character",
    1043: "character varying",
    1082: "date",
    1114: "timestamp without time zone",
    1184: "timestamp with time zone",
    1700: "numeric",
    2205: "regclass",
    2206: "regtype",
}
"""``format_type``'s names, as PostgreSQL writes them."""

_TABLES = {
    "pg_namespace": "oid BIGINT, nspname VARCHAR, nspowner BIGINT, nspacl VARCHAR",
    "pg_class": (
        "oid BIGINT, relname VARCHAR, relnamespace BIGINT, reltype BIGINT, reloftype BIGINT, "
        "relowner BIGINT, relam BIGINT, relfilenode BIGINT, reltablespace BIGINT, "
        "relpages INTEGER, reltuples REAL, relallvisible INTEGER, reltoastrelid BIGINT, "
        "relhasindex BOOLEAN, relisshared BOOLEAN, relpersistence VARCHAR, relkind VARCHAR, "
        "relnatts SMALLINT, relchecks SMALLINT, relhasrules BOOLEAN, relhastriggers BOOLEAN, "
        "relhassubclass BOOLEAN, relrowsecurity BOOLEAN, relforcerowsecurity BOOLEAN, "
        "relispopulated BOOLEAN, relreplident VARCHAR, relispartition BOOLEAN, "
        "relrewrite BIGINT, relfrozenxid BIGINT, relminmxid BIGINT, relacl VARCHAR, "
        "reloptions VARCHAR[], relpartbound VARCHAR, relhasoids BOOLEAN"
    ),
    "pg_attribute": (
        "attrelid BIGINT, attname VARCHAR, atttypid BIGINT, attstattarget INTEGER, "
        "attlen SMALLINT, attnum SMALLINT, attndims INTEGER, attcacheoff INTEGER, "
        "atttypmod INTEGER, attbyval BOOLEAN, attalign VARCHAR, attstorage VARCHAR, "
        "attcompression VARCHAR, attnotnull BOOLEAN, atthasdef BOOLEAN, atthasmissing BOOLEAN, "
        "attidentity VARCHAR, attgenerated VARCHAR, attisdropped BOOLEAN, attislocal BOOLEAN, "
        "attinhcount INTEGER, attcollation BIGINT, attacl VARCHAR, attoptions VARCHAR[], "
        "attfdwoptions VARCHAR[]"
    ),
    "pg_type": (
        "oid BIGINT, typname VARCHAR, typnamespace BIGINT, typowner BIGINT, typlen SMALLINT, "
        "typbyval BOOLEAN, typtype VARCHAR, typcategory VARCHAR, typispreferred BOOLEAN, "
        "typisdefined BOOLEAN, typdelim VARCHAR, typrelid BIGINT, typelem BIGINT, "
        "typarray BIGINT, typinput VARCHAR, typoutput VARCHAR, typreceive VARCHAR, "
        "typsend VARCHAR, typmodin VARCHAR, typmodout VARCHAR, typanalyze VARCHAR, "
        "typalign VARCHAR, typstorage VARCHAR, typnotnull BOOLEAN, typbasetype BIGINT, "
        "typtypmod INTEGER, typndims INTEGER, typcollation BIGINT, typdefaultbin VARCHAR, "
        "typdefault VARCHAR, typacl VARCHAR"
    ),
    "pg_database": (
        "oid BIGINT, datname VARCHAR, datdba BIGINT, encoding INTEGER, datlocprovider VARCHAR, "
        "datistemplate BOOLEAN, datallowconn BOOLEAN, datconnlimit INTEGER, "
        "datfrozenxid BIGINT, datminmxid BIGINT, dattablespace BIGINT, datcollate VARCHAR, "
        "datctype VARCHAR, daticulocale VARCHAR, datcollversion VARCHAR, datacl VARCHAR"
    ),
    "pg_roles": (
        "oid BIGINT, rolname VARCHAR, rolsuper BOOLEAN, rolinherit BOOLEAN, "
        "rolcreaterole BOOLEAN, rolcreatedb BOOLEAN, rolcanlogin BOOLEAN, "
        "rolreplication BOOLEAN, rolconnlimit INTEGER, rolpassword VARCHAR, "
        "rolvaliduntil TIMESTAMP, rolbypassrls BOOLEAN, rolconfig VARCHAR[]"
    ),
    "pg_user": (
        "usename VARCHAR, usesysid BIGINT, usecreatedb BOOLEAN, usesuper BOOLEAN, "
        "userepl BOOLEAN, usebypassrls BOOLEAN, passwd VARCHAR, valuntil TIMESTAMP, "
        "useconfig VARCHAR[]"
    ),
    "pg_description": "objoid BIGINT, classoid BIGINT, objsubid INTEGER, description VARCHAR",
    "pg_am": "oid BIGINT, amname VARCHAR, amhandler VARCHAR, amtype VARCHAR",
    "pg_settings": (
        "name VARCHAR, setting VARCHAR, unit VARCHAR, category VARCHAR, short_desc VARCHAR, "
        "extra_desc VARCHAR, context VARCHAR, vartype VARCHAR, source VARCHAR"
    ),
    "pg_tablespace": "oid BIGINT, spcname VARCHAR, spcowner BIGINT, spcacl VARCHAR",
    "pg_collation": (
        "oid BIGINT, collname VARCHAR, collnamespace BIGINT, collowner BIGINT, "
        "collprovider VARCHAR, collisdeterministic BOOLEAN, collencoding INTEGER, "
        "collcollate VARCHAR, collctype VARCHAR"
    ),
    # Tables a dataset has no rows for: they exist so that a client's query runs, and are empty.
    "pg_attrdef": "oid BIGINT, adrelid BIGINT, adnum SMALLINT, adbin VARCHAR",
    "pg_index": (
        "indexrelid BIGINT, indrelid BIGINT, indnatts SMALLINT, indnkeyatts SMALLINT, "
        "indisunique BOOLEAN, indnullsnotdistinct BOOLEAN, indisprimary BOOLEAN, "
        "indisexclusion BOOLEAN, indimmediate BOOLEAN, indisclustered BOOLEAN, "
        "indisvalid BOOLEAN, indcheckxmin BOOLEAN, indisready BOOLEAN, indislive BOOLEAN, "
        "indisreplident BOOLEAN, indkey SMALLINT[], indcollation BIGINT[], indclass BIGINT[], "
        "indoption SMALLINT[], indexprs VARCHAR, indpred VARCHAR"
    ),
    "pg_constraint": (
        "oid BIGINT, conname VARCHAR, connamespace BIGINT, contype VARCHAR, "
        "condeferrable BOOLEAN, condeferred BOOLEAN, convalidated BOOLEAN, conrelid BIGINT, "
        "contypid BIGINT, conindid BIGINT, conparentid BIGINT, confrelid BIGINT, "
        "confupdtype VARCHAR, confdeltype VARCHAR, confmatchtype VARCHAR, conislocal BOOLEAN, "
        "coninhcount INTEGER, connoinherit BOOLEAN, conkey SMALLINT[], confkey SMALLINT[], "
        "conbin VARCHAR"
    ),
    "pg_inherits": (
        "inhrelid BIGINT, inhparent BIGINT, inhseqno INTEGER, inhdetachpending BOOLEAN"
    ),
    "pg_policy": (
        "oid BIGINT, polname VARCHAR, polrelid BIGINT, polcmd VARCHAR, polpermissive BOOLEAN, "
        "polroles BIGINT[], polqual VARCHAR, polwithcheck VARCHAR"
    ),
    "pg_statistic_ext": (
        "oid BIGINT, stxrelid BIGINT, stxname VARCHAR, stxnamespace BIGINT, stxowner BIGINT, "
        "stxstattarget INTEGER, stxkeys SMALLINT[], stxkind VARCHAR[], stxexprs VARCHAR"
    ),
    "pg_statistic_ext_data": "stxoid BIGINT, stxdinherit BOOLEAN",
    "pg_publication": (
        "oid BIGINT, pubname VARCHAR, pubowner BIGINT, puballtables BOOLEAN, "
        "pubinsert BOOLEAN, pubupdate BOOLEAN, pubdelete BOOLEAN, pubtruncate BOOLEAN, "
        "pubviaroot BOOLEAN"
    ),
    "pg_publication_rel": "oid BIGINT, prpubid BIGINT, prrelid BIGINT, prqual VARCHAR, prattrs SMALLINT[]",
    "pg_publication_namespace": "oid BIGINT, pnpubid BIGINT, pnnspid BIGINT",
    "pg_trigger": (
        "oid BIGINT, tgrelid BIGINT, tgparentid BIGINT, tgname VARCHAR, tgfoid BIGINT, "
        "tgtype SMALLINT, tgenabled VARCHAR, tgisinternal BOOLEAN, tgconstrrelid BIGINT, "
        "tgconstrindid BIGINT, tgconstraint BIGINT"
    ),
    "pg_rewrite": (
        "oid BIGINT, rulename VARCHAR, ev_class BIGINT, ev_type VARCHAR, ev_enabled VARCHAR, "
        "is_instead BOOLEAN"
    ),
    "pg_partitioned_table": "partrelid BIGINT, partstrat VARCHAR, partnatts SMALLINT",
    "pg_foreign_table": "ftrelid BIGINT, ftserver BIGINT, ftoptions VARCHAR[]",
    "pg_proc": (
        "oid BIGINT, proname VARCHAR, pronamespace BIGINT, proowner BIGINT, prokind VARCHAR, "
        "prorettype BIGINT, proargtypes VARCHAR, proretset BOOLEAN"
    ),
    "pg_extension": "oid BIGINT, extname VARCHAR, extowner BIGINT, extnamespace BIGINT, extversion VARCHAR",
    "pg_enum": "oid BIGINT, enumtypid BIGINT, enumsortorder REAL, enumlabel VARCHAR",
    "pg_range": "rngtypid BIGINT, rngsubtype BIGINT",
    "pg_sequence": (
        "seqrelid BIGINT, seqtypid BIGINT, seqstart BIGINT, seqincrement BIGINT, "
        "seqmax BIGINT, seqmin BIGINT, seqcache BIGINT, seqcycle BOOLEAN"
    ),
    "pg_depend": (
        "classid BIGINT, objid BIGINT, objsubid INTEGER, refclassid BIGINT, refobjid BIGINT, "
        "refobjsubid INTEGER, deptype VARCHAR"
    ),
    "pg_matviews": "schemaname VARCHAR, matviewname VARCHAR, matviewowner VARCHAR, definition VARCHAR",
    "pg_stat_activity": "datid BIGINT, datname VARCHAR, pid INTEGER, usename VARCHAR, state VARCHAR",
}
SHADOW_TABLES = frozenset(_TABLES)
"""The ``pg_catalog`` tables the shadow catalog holds; a client's reference to one reads ours."""

_MACROS = (
    "pgc_owner(oid) AS 'dalenius'",
    "pg_get_userbyid(oid) AS 'dalenius'",
    "pg_table_is_visible(oid) AS true",
    "pg_type_is_visible(oid) AS true",
    "pg_function_is_visible(oid) AS true",
    "pg_get_expr(expr, relid, pretty := false) AS CAST(NULL AS VARCHAR)",
    "pg_get_constraintdef(oid, pretty := false) AS CAST(NULL AS VARCHAR)",
    "pg_get_indexdef(oid, col := 0, pretty := false) AS CAST(NULL AS VARCHAR)",
    "pg_get_viewdef(oid, pretty := false) AS CAST(NULL AS VARCHAR)",
    "pg_get_partkeydef(oid) AS CAST(NULL AS VARCHAR)",
    "pg_get_statisticsobjdef_columns(oid) AS CAST(NULL AS VARCHAR)",
    "pg_encoding_to_char(e) AS 'UTF8'",
    "pg_relation_is_publishable(oid) AS false",
    "pg_get_serial_sequence(t, c) AS CAST(NULL AS VARCHAR)",
    "pg_collation_is_visible(oid) AS true",
    "pg_opclass_is_visible(oid) AS true",
    "pg_get_function_identity_arguments(oid) AS ''",
    "pg_get_function_result(oid) AS ''",
    "pg_get_triggerdef(oid, pretty := false) AS CAST(NULL AS VARCHAR)",
    "pg_get_ruledef(oid, pretty := false) AS CAST(NULL AS VARCHAR)",
    "quote_ident(x) AS '\"' || replace(x, '\"', '\"\"') || '\"'",
    "pg_relation_size(oid) AS CAST(NULL AS BIGINT)",
    "pg_total_relation_size(oid) AS CAST(NULL AS BIGINT)",
    "pg_size_pretty(n) AS CAST(NULL AS VARCHAR)",
    "has_table_privilege(a, b := NULL, c := NULL) AS true",
    "has_schema_privilege(a, b := NULL, c := NULL) AS true",
    "has_database_privilege(a, b := NULL, c := NULL) AS true",
    "pg_is_in_recovery() AS false",
    "pg_backend_pid() AS 0",
    "pg_postmaster_start_time() AS TIMESTAMP '2026-01-01 00:00:00'",
    "txid_current() AS 0",
    "pg_get_keywords() AS TABLE SELECT 'select' AS word, 'R' AS catcode, 'reserved' AS catdesc",
    "obj_description(oid, cls := NULL) AS (SELECT description FROM pgc.pg_description d "
    "WHERE d.objoid = oid AND d.objsubid = 0 LIMIT 1)",
    "col_description(rel, num) AS (SELECT description FROM pgc.pg_description d "
    "WHERE d.objoid = rel AND d.objsubid = num LIMIT 1)",
    "shobj_description(oid, cls) AS CAST(NULL AS VARCHAR)",
    "pgc_regclass(x) AS (SELECT c.oid FROM pgc.pg_class c WHERE c.relname = "
    "CAST(x AS VARCHAR) OR CAST(c.oid AS VARCHAR) = CAST(x AS VARCHAR) LIMIT 1)",
    "pgc_regtype(x) AS format_type(TRY_CAST(x AS BIGINT), NULL)",
    "pgc_regproc(x) AS CAST(x AS VARCHAR)",
    "pgc_regnamespace(x) AS (SELECT n.nspname FROM pgc.pg_namespace n WHERE n.oid = "
    "TRY_CAST(x AS BIGINT))",
    "pgc_regrole(x) AS 'dalenius'",
    "to_regtype(x) AS (SELECT t.oid FROM pgc.pg_type t WHERE t.typname = CAST(x AS VARCHAR) "
    "OR format_type(t.oid, NULL) = CAST(x AS VARCHAR) LIMIT 1)",
    "to_regclass(x) AS pgc_regclass(x)",
    # PostgreSQL's set-returning key expansion; only ever applied to pg_index's rows, and a
    # dataset has no indexes, so it binds but is never called on a row.
    "_pg_expandarray(a) AS {'x': CAST(NULL AS BIGINT), 'n': CAST(NULL AS BIGINT)}",
    "array_lower(a, d) AS CASE WHEN len(a) > 0 THEN 1 END",
    "array_upper(a, d) AS CASE WHEN len(a) > 0 THEN len(a) END",
    "current_schemas(implicit) AS ['public']",
    "session_user() AS current_user",
)


class CatalogQueryError(QueryError):
    """A catalog query the shadow catalog cannot answer (a table or function it lacks)."""


@dataclass(frozen=True)
class CatalogAnswer:
    """A catalog query's answer: column names, DuckDB type names and rows."""

    columns: tuple[str, ...]
    types: tuple[str, ...]
    rows: list[tuple[Any, ...]]


class ShadowCatalog:
    """One dataset's shadow catalog: an in-memory DuckDB with public metadata only.

    Args:
        dataset: the dataset's name (the PostgreSQL database name).
        catalog: its catalog; only declared metadata is read from it, never a file.
        user: the signed-in analyst (what ``current_user`` answers).
    """

    def __init__(self, dataset: str, catalog: Catalog, descriptions: dict[str, Any]) -> None:
        self.dataset = dataset
        self.table_names = tuple(table.name for table in catalog.tables)
        self.column_types: dict[str, str] = {}
        for table in catalog.tables:
            for column in table.columns:
                self.column_types.setdefault(column.name, column.type)
        self._lock = threading.Lock()
        self._db = duckdb.connect(":memory:", config={"threads": 1})
        self._build(catalog, descriptions)

    def _build(self, catalog: Catalog, descriptions: dict[str, Any]) -> None:
        self._create_schema()
        self._insert_builtins()
        self._insert_catalog(catalog, descriptions)

    def _create_schema(self) -> None:
        """The shadow schema's tables and functions (macros), all empty."""
        db = self._db
        db.execute("CREATE SCHEMA public")
        db.execute(f"CREATE SCHEMA {SHADOW_SCHEMA}")
        for name, columns in _TABLES.items():
            db.execute(f"CREATE TABLE {SHADOW_SCHEMA}.{name} ({columns})")
        # Macros are bound when created: the search path must already find the shadow schema.
        db.execute(f"SET search_path = 'public,{SHADOW_SCHEMA}'")
        cases = " ".join(f"WHEN {oid} THEN '{name}'" for oid, name in FORMAT_NAMES.items())
        db.execute(
            f"CREATE MACRO {SHADOW_SCHEMA}.format_type(t, m) AS "
            f"CASE t {cases} ELSE CAST(NULL AS VARCHAR) END"
        )
        for macro in _MACROS:
            db.execute(f"CREATE MACRO {SHADOW_SCHEMA}.{macro}")

    def _insert_builtins(self) -> None:
        """What every PostgreSQL database has: its namespaces, access method, database, role,
        tablespace, collation, settings and built-in types.

        Long because each row of PostgreSQL's catalog tables is written out field by field.
        """
        insert = self._insert
        insert(
            "pg_namespace",
            [
                (CATALOG_NAMESPACE_OID, "pg_catalog", 10, None),
                (NAMESPACE_OID, "public", 10, None),
                (INFO_NAMESPACE_OID, "information_schema", 10, None),
            ],
        )
        insert("pg_am", [(2, "heap", "heap_tableam_handler", "t")])
        insert(
            "pg_database",
            [
                (
                    16383,
                    self.dataset,
                    10,
                    6,
                    "c",
                    False,
                    True,
                    -1,
                    0,
                    0,
                    1663,
                    "C",
                    "C",
                    None,
                    None,
                    None,
                ),
            ],
        )
        insert(
            "pg_roles",
            [
                (
                    10,
                    "dalenius",
                    False,
                    True,
                    False,
                    False,
                    True,
                    False,
                    -1,
                    "********",
                    None,
                    False,
                    None,
                ),
            ],
        )
        insert("pg_tablespace", [(1663, "pg_default", 10, None)])
        insert(
            "pg_settings",
            [
                (name, value, None, "Preset Options", "", "", "internal", "string", "default")
                for name, value in SERVER_SETTINGS.items()
            ],
        )
        insert(
            "pg_collation", [(100, "default", CATALOG_NAMESPACE_OID, 10, "d", True, -1, None, None)]
        )
        insert(
            "pg_type",
            [
                (
                    oid,
                    name,
                    CATALOG_NAMESPACE_OID,
                    10,
                    length,
                    length > 0,
                    "b",
                    category,
                    False,
                    True,
                    ",",
                    0,
                    0,
                    0,
                    f"{name}in",
                    f"{name}out",
                    f"{name}recv",
                    f"{name}send",
                    "-",
                    "-",
                    "-",
                    "i",
                    "p",
                    False,
                    0,
                    -1,
                    0,
                    100 if category == "S" else 0,
                    None,
                    None,
                    None,
                )
                for oid, name, length, category in BUILTIN_TYPES
            ],
        )

    def _insert_catalog(self, catalog: Catalog, descriptions: dict[str, Any]) -> None:
        """The dataset's tables: an empty table each (for ``information_schema``), and their
        rows in ``pg_class``, ``pg_attribute`` and ``pg_description``.

        Long because a ``pg_class`` row has 34 fields, written out one by one.
        """
        db = self._db
        insert = self._insert
        classes, attributes, comments = [], [], []
        table_descriptions = descriptions.get("tables", {}) if descriptions else {}
        for index, table in enumerate(catalog.tables):
            oid = FIRST_TABLE_OID + 2 * index
            columns = ", ".join(
                f'"{c.name}" {TYPES[c.type][2]}' + ("" if c.nullable else " NOT NULL")
                for c in table.columns
            )
            db.execute(f'CREATE TABLE public."{table.name}" ({columns})')
            classes.append(
                (
                    oid,
                    table.name,
                    NAMESPACE_OID,
                    oid + 1,
                    0,
                    10,
                    2,
                    oid,
                    0,
                    0,
                    -1.0,
                    0,
                    0,
                    False,
                    False,
                    "p",
                    "r",
                    len(table.columns),
                    0,
                    False,
                    False,
                    False,
                    False,
                    False,
                    True,
                    "d",
                    False,
                    0,
                    0,
                    0,
                    None,
                    None,
                    None,
                    False,
                )
            )
            about = (
                table_descriptions.get(table.name, {})
                if isinstance(table_descriptions, dict)
                else {}
            )
            if isinstance(about, dict) and about.get("description"):
                comments.append((oid, 1259, 0, str(about["description"])))
            column_notes = about.get("columns", {}) if isinstance(about, dict) else {}
            for number, column in enumerate(table.columns, start=1):
                attributes.append(_attribute(oid, number, column))
                note = column_notes.get(column.name) if isinstance(column_notes, dict) else None
                if note:
                    comments.append((oid, 1259, number, str(note)))
        insert("pg_class", classes)
        insert("pg_attribute", attributes)
        insert("pg_description", comments)

    def _insert(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        if rows:
            marks = ", ".join("?" * len(rows[0]))
            self._db.executemany(f"INSERT INTO {SHADOW_SCHEMA}.{table} VALUES ({marks})", rows)

    def answer(self, sql: str, user: str, settings: dict[str, str]) -> CatalogAnswer:
        """Run a catalog statement on the shadow catalog (it raises DuckDB's errors)."""
        session = {
            "version": VERSION,
            "current_database": self.dataset,
            "current_catalog": self.dataset,
            "current_schema": "public",
            "current_user": user,
            "session_user": user,
            "user": user,
            "current_role": user,
        }
        text = shadow_sql(sql, SHADOW_TABLES, session, settings)
        with self._lock:
            # One connection, behind the lock: the search path that finds the shadow
            # catalog's functions is a setting of the connection, which a cursor would not have.
            try:
                found = self._db.execute(text)
                described = found.description or []
                rows = found.fetchall()
            except duckdb.Error as error:
                first = str(error).splitlines()[0]
                raise CatalogQueryError(
                    "the gateway's catalog cannot answer this catalog query.",
                    sql=sql,
                    why=f"it holds the public catalog only, in a subset of PostgreSQL's "
                    f"pg_catalog ({first}).",
                    fix="read the tables and columns from information_schema, or ask through "
                    "psql's \\d; nothing was read or spent.",
                ) from None
        return CatalogAnswer(
            tuple(d[0] for d in described), tuple(str(d[1]) for d in described), rows
        )


def _attribute(relid: int, number: int, column: Column) -> tuple[Any, ...]:
    oid, _, _, length = TYPES[column.type]
    return (
        relid,
        column.name,
        oid,
        -1,
        length,
        number,
        0,
        -1,
        -1,
        length > 0,
        "d",
        "p",
        "",
        not column.nullable,
        False,
        False,
        "",
        "",
        False,
        True,
        0,
        100 if column.type == "str" else 0,
        None,
        None,
        None,
    )
