"""Host credential records contract: add, rotate, revoke, last seen, on both backends."""

from __future__ import annotations

import pytest

from hyperhive.errors import Conflict, NotFound
from hyperhive.netlink.credentials import hash_secret, new_secret, verify_secret
from hyperhive.store import Store
from tests.support.stores import Backend

pytestmark = pytest.mark.anyio


async def test_add_keeps_only_the_hash_and_refuses_a_taken_name(store: Store) -> None:
    secret = new_secret()
    row = await store.hosts.add("h1", hash_secret(secret))
    assert row.name == "h1" and row.secret_hash != secret and not row.revoked
    assert verify_secret(secret, row.secret_hash)
    assert not verify_secret(new_secret(), row.secret_hash)
    with pytest.raises(Conflict, match="hosts rotate h1"):
        await store.hosts.add("h1", hash_secret(new_secret()))
    assert [h.name for h in await store.hosts.list()] == ["h1"]
    assert await store.hosts.get("nope") is None


async def test_rotate_replaces_and_unrevokes_revoke_marks(store: Store) -> None:
    old, new = new_secret(), new_secret()
    await store.hosts.add("h2", hash_secret(old))
    await store.hosts.add("h1", hash_secret(old))
    revoked = await store.hosts.revoke("h2")
    assert revoked.revoked and revoked.revoked_at is not None
    rotated = await store.hosts.rotate("h2", hash_secret(new))
    assert not rotated.revoked and rotated.rotated_at is not None
    assert verify_secret(new, rotated.secret_hash) and not verify_secret(old, rotated.secret_hash)
    assert [h.name for h in await store.hosts.list()] == ["h1", "h2"]
    with pytest.raises(NotFound, match="hosts list"):
        await store.hosts.rotate("ghost", hash_secret(new))
    with pytest.raises(NotFound):
        await store.hosts.revoke("ghost")


async def test_last_seen_survives_reopen(backend: Backend) -> None:
    store = await backend.open()
    try:
        await store.hosts.add("h1", hash_secret(new_secret()))
        await store.hosts.seen("h1", 1234.5)
        await store.hosts.seen("ghost", 1.0)  # unknown: nothing to note, no error
    finally:
        await store.close()
    store = await backend.open()
    try:
        row = await store.hosts.get("h1")
        assert row is not None and row.last_seen_at == 1234.5
    finally:
        await store.close()


async def test_epochs_rise_per_registration_and_a_superseded_epoch_cannot_renew(
    backend: Backend,
) -> None:
    store = await backend.open()
    try:
        await store.hosts.add("h1", hash_secret(new_secret()))
        assert await store.hosts.new_epoch("h1", 100.0) == 1
        assert await store.hosts.renew("h1", 1, 90.0, 105.0, '{"claude_slots": 2}')
        assert await store.hosts.new_epoch("h1", 200.0) == 2
        # The old link's late heartbeat changes nothing.
        assert not await store.hosts.renew("h1", 1, 91.0, 999.0, "{}")
        with pytest.raises(NotFound):
            await store.hosts.new_epoch("ghost", 1.0)
    finally:
        await store.close()
    store = await backend.open()  # durable: a standby coordinator reads the same lease
    try:
        row = await store.hosts.get("h1")
        assert row is not None and row.epoch == 2 and row.lease_expires_at == 200.0
        assert row.heartbeat_at == 90.0 and row.capacity == '{"claude_slots": 2}'
    finally:
        await store.close()


async def test_a_loss_claim_is_once_per_epoch_and_durable(backend: Backend) -> None:
    store = await backend.open()
    try:
        await store.hosts.add("h1", hash_secret(new_secret()))
        epoch = await store.hosts.new_epoch("h1", 100.0)
        assert not await store.hosts.claim_loss("h1", epoch + 1)  # not its latest link
        assert not await store.hosts.claim_loss("ghost", 1)
        assert await store.hosts.claim_loss("h1", epoch)
    finally:
        await store.close()
    store = await backend.open()  # a coordinator taking over reads the same
    try:
        row = await store.hosts.get("h1")
        assert row is not None and row.lost_epoch == epoch
        assert not await store.hosts.claim_loss("h1", epoch)  # told once
        again = await store.hosts.new_epoch("h1", 200.0)  # it came back: a new loss is news
        assert await store.hosts.claim_loss("h1", again)
    finally:
        await store.close()


async def test_a_credentials_expiry_is_kept_and_rotate_replaces_it(store: Store) -> None:
    row = await store.hosts.add("h1", hash_secret(new_secret()), expires_at=1000.0)
    assert row.expires_at == 1000.0 and row.expired(1000.0) and not row.expired(999.0)
    forever = await store.hosts.add("h2", hash_secret(new_secret()))
    assert forever.expires_at is None and not forever.expired(1e12)
    rotated = await store.hosts.rotate("h1", hash_secret(new_secret()), expires_at=5000.0)
    assert rotated.expires_at == 5000.0
    cleared = await store.hosts.rotate("h1", hash_secret(new_secret()))
    assert cleared.expires_at is None
    [h1, _] = await store.hosts.list()
    assert h1.expires_at is None
