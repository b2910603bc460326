"""The gateway's own records, shared by every process opened on the same database."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dalenius.core.errors import ConfigurationError
from dalenius.server.store import ConflictError, NotFoundError, StateStore
from dalenius.server.tokens import digest, new_token, parse_token, verify


def test_tokens_are_random_well_formed_and_checked_by_hash() -> None:
    issued = [new_token() for _ in range(100)]
    assert len({t.token for t in issued}) == 100
    for token in issued:
        assert parse_token(token.token) == token.token_id
        assert token.hash == digest(token.token) and token.token not in token.hash
        assert verify(token.token, token.hash)
        assert not verify(token.token[:-1] + ("A" if token.token[-1] != "A" else "B"), token.hash)
    assert parse_token("dlt_short_x") is None
    assert parse_token(issued[0].token + " ") is None


def test_two_stores_on_one_sqlite_file_see_each_other(tmp_path: Path) -> None:
    path = str(tmp_path / "gateway.sqlite")
    first, second = StateStore(path), StateStore(f"sqlite:///{path}")
    try:
        first.create_principal("alice", "analyst", by="root")
        issued = first.issue_token("alice", by="root")
        caller = second.authenticate(issued.token)
        assert caller is not None and caller.name == "alice" and not caller.is_curator
        second.revoke_token("alice", issued.token_id)
        assert first.authenticate(issued.token) is None
        first.register("census", "/data/census.toml", by="root")
        second.grant("alice", "census", by="root")
        assert first.is_granted("alice", "census")
        with pytest.raises(ConflictError):
            second.create_principal("alice", "curator", by="root")
        with pytest.raises(ConflictError):
            second.register("census", "/elsewhere/census.toml", by="root")
    finally:
        first.close()
        second.close()


def test_names_roles_and_missing_things_are_refused() -> None:
    store = StateStore("memory:")
    try:
        for name in ("", "a b", "x" * 65, "-lead", "über"):
            with pytest.raises(ConfigurationError):
                store.create_principal(name, "analyst", by="root")
        with pytest.raises(ConfigurationError):
            store.create_principal("bob", "admin", by="root")
        with pytest.raises(NotFoundError):
            store.issue_token("nobody", by="root")
        store.create_principal("bob", "analyst", by="root")
        with pytest.raises(NotFoundError):
            store.grant("bob", "nowhere", by="root")
        with pytest.raises(NotFoundError):
            store.unregister("nowhere")
        with pytest.raises(ConflictError):
            store.ensure_principal("bob", "curator", by="root")
        assert store.ensure_principal("bob", "analyst", by="root").name == "bob"
    finally:
        store.close()


def test_rate_limit_buckets_of_a_sqlite_file_live_in_a_sidecar_with_its_own_write_lock(
    tmp_path: Path,
) -> None:
    """A request's bucket write never queues behind the ledger's synced commits in the same file."""
    path = tmp_path / "gateway.sqlite"
    store = StateStore(str(path))
    try:
        assert store.take("token:a", rate=1.0, burst=2, now=100.0) == 0.0
        assert store.bucket_count() == 1
    finally:
        store.close()
    sidecar = sqlite3.connect(f"{path}-limits")
    main = sqlite3.connect(path)
    try:
        assert sidecar.execute("SELECT client FROM dalenius_gateway_buckets").fetchall() == [
            ("token:a",)
        ]
        assert main.execute("SELECT COUNT(*) FROM dalenius_gateway_buckets").fetchone() == (0,)
    finally:
        sidecar.close()
        main.close()


def test_access_reads_registration_grant_and_floor_in_one_step() -> None:
    from fractions import Fraction

    store = StateStore("memory:")
    try:
        assert store.access("alice", "census") == (None, False, None)
        store.create_principal("alice", "analyst", by="root")
        store.create_principal("bob", "analyst", by="root")
        store.register("census", "/data/census.toml", by="root")
        registration, granted, floor = store.access("alice", "census")
        assert registration == store.registration("census")
        assert (granted, floor) == (False, None)
        store.grant("alice", "census", by="root")
        store.set_floor("census", Fraction(1, 50), by="root")
        assert store.access("alice", "census")[1:] == (True, Fraction(1, 50))
        assert store.access("bob", "census")[1:] == (False, Fraction(1, 50))
        store.revoke_grant("alice", "census")
        assert store.access("alice", "census")[1] is False
    finally:
        store.close()
