"""Agents' Matrix accounts on a real Synapse: provisioning in both modes, refusal, deactivation.

No claude here: :class:`MatrixAdmin` against the session's Synapse. The e2e
suite (``tests/e2e/test_matrix_e2e.py``) covers the watcher and the tools.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import httpx
import pytest

from hyperhive.errors import ConfigError
from hyperhive.matrix.admin import MatrixAdmin, deactivate_agent
from hyperhive.matrix.config import MatrixConfig
from hyperhive.matrix.errors import MatrixError
from tests.support.synapse import Synapse, register

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]


def _whoami(synapse: Synapse, token: str) -> int:
    got = httpx.get(
        f"{synapse.url}/_matrix/client/v3/account/whoami",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    return got.status_code


def _config(synapse: Synapse, tmp_path: Path, **creds: Path) -> MatrixConfig:
    return MatrixConfig(
        homeserver=synapse.url,
        server_name=synapse.server_name,
        hive=f"t{secrets.token_hex(3)}",
        **creds,  # type: ignore[arg-type]
    )


async def test_shared_secret_provisioning_signs_in_again_and_deactivates(
    synapse: Synapse, tmp_path: Path
) -> None:
    secret = synapse.write_secret(tmp_path / "secret")
    config = _config(synapse, tmp_path, registration_shared_secret_file=secret)
    admin = MatrixAdmin(config)
    try:
        first = await admin.provision("ana")
        assert first.user_id == config.user_id("ana") == f"@{config.hive}-ana:hive.test"
        assert _whoami(synapse, first.access_token) == 200
        # The account exists now: provisioning again signs in (the token file was lost).
        again = await admin.provision("ana")
        assert again.user_id == first.user_id and again.access_token != first.access_token
        assert _whoami(synapse, again.access_token) == 200

        # Destroy: deactivated, its tokens dead, and it cannot be provisioned back silently.
        assert await deactivate_agent(config, "ana", enabled=True) is None
        assert _whoami(synapse, again.access_token) == 401
        with pytest.raises(MatrixError, match="cannot sign in"):
            await admin.provision("ana")
    finally:
        await admin.aclose()


async def test_an_account_the_hive_did_not_make_is_refused(
    synapse: Synapse, tmp_path: Path
) -> None:
    secret = synapse.write_secret(tmp_path / "secret")
    config = _config(synapse, tmp_path, registration_shared_secret_file=secret)
    person = register(synapse, config.localpart("bob"))  # someone took the name first
    admin = MatrixAdmin(config)
    try:
        with pytest.raises(MatrixError, match="not made by this hive"):
            await admin.provision("bob")
        assert _whoami(synapse, person.access_token) == 200  # their account is untouched
    finally:
        await admin.aclose()


async def test_admin_token_mode_creates_the_account(synapse: Synapse, tmp_path: Path) -> None:
    operator = register(synapse, f"admin-{secrets.token_hex(3)}", admin=True)
    token_file = tmp_path / "admin-token"
    token_file.write_text(operator.access_token)
    token_file.chmod(0o600)
    config = _config(synapse, tmp_path, admin_token_file=token_file)
    admin = MatrixAdmin(config)
    try:
        account = await admin.provision("cleo")
        assert account.user_id == config.user_id("cleo")
        assert _whoami(synapse, account.access_token) == 200
        again = await admin.provision("cleo")  # exists: signed in, not re-created
        assert again.user_id == account.user_id and _whoami(synapse, again.access_token) == 200
        assert await deactivate_agent(config, "cleo", enabled=True) is None
        assert _whoami(synapse, again.access_token) == 401
    finally:
        await admin.aclose()


async def test_a_secret_file_others_can_read_is_refused_with_the_fix(
    synapse: Synapse, tmp_path: Path
) -> None:
    secret = synapse.write_secret(tmp_path / "secret")
    secret.chmod(0o644)
    config = _config(synapse, tmp_path, registration_shared_secret_file=secret)
    with pytest.raises(ConfigError, match=rf"mode 0o644.*chmod 600 {secret}"):
        MatrixAdmin(config)
    # Destroy never raises for it: the problem comes back for the log.
    problem = await deactivate_agent(config, "ana", enabled=True)
    assert problem is not None and "chmod 600" in problem


async def test_a_wrong_shared_secret_is_named(synapse: Synapse, tmp_path: Path) -> None:
    wrong = tmp_path / "secret"
    wrong.write_text("not-the-secret")
    wrong.chmod(0o600)
    admin = MatrixAdmin(_config(synapse, tmp_path, registration_shared_secret_file=wrong))
    try:
        with pytest.raises(MatrixError, match="rejected the shared secret"):
            await admin.provision("dan")
    finally:
        await admin.aclose()


async def test_watcher_accepts_invites_wakes_in_wake_rooms_and_signs_in_again_after_logout(
    synapse: Synapse, tmp_path: Path
) -> None:
    from hyperhive.matrix.agent import AgentMatrix
    from hyperhive.matrix.config import AgentMatrixConfig
    from hyperhive.matrix.errors import MatrixTokenRejected
    from hyperhive.matrix.identity import read_account, read_sync_state
    from hyperhive.matrix.watcher import MatrixWatcher
    from tests.support.synapse import Person

    secret = synapse.write_secret(tmp_path / "secret")
    owner = register(synapse, f"owner-{secrets.token_hex(3)}")
    config = MatrixConfig(
        homeserver=synapse.url,
        server_name=synapse.server_name,
        hive=f"t{secrets.token_hex(3)}",
        registration_shared_secret_file=secret,
        operator=owner.user_id,
    )
    person = Person(synapse, owner)
    alias_local = f"ops-{secrets.token_hex(3)}"
    room_id = str((await person.client.room_create(alias=alias_local, name="ops")).room_id)
    await person.say(room_id, "old news, before the agent existed")
    admin = MatrixAdmin(config)
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    wakes: list[tuple[str, str]] = []

    async def deliver(body: str, key: str) -> None:  # the plug-in point the host fills
        wakes.append((body, key))

    agent_config = AgentMatrixConfig(
        enabled=True, wake_rooms=[f"#{alias_local}:{synapse.server_name}"]
    )
    matrix = AgentMatrix(admin, "ana", state_dir, agent_config)
    watcher = MatrixWatcher(matrix, deliver, timeout=1, backoff_max=0.5)
    try:
        assert await watcher.sync_once() == 0  # provisions, first sync: no token, no wakes
        assert watcher.wake_rooms == {room_id}
        await person.client.room_invite(room_id, matrix.user_id)
        assert await watcher.sync_once() == 0  # the operator's invitation: accepted
        assert (await person.members(room_id))[matrix.user_id] == "join"
        # The next sync brings the joined room's history along: what was said while the
        # agent was only invited is news to it, and a wake room wakes for each message.
        assert await watcher.sync_once() == 1
        assert "old news" in wakes[-1][0] and "message from" in wakes[-1][0]

        # Its token is logged out on the homeserver: the next sync is refused, the host
        # signs in again, and the one after works with the new token.
        first = read_account(state_dir)
        assert first is not None
        async with httpx.AsyncClient() as http:
            out = await http.post(
                f"{synapse.url}/_matrix/client/v3/logout",
                headers={"Authorization": f"Bearer {first.access_token}"},
            )
        out.raise_for_status()
        await person.say(room_id, "after the logout")
        with pytest.raises(MatrixTokenRejected):
            await watcher.sync_once()
        assert await watcher.sync_once() == 1
        assert "after the logout" in wakes[-1][0] and wakes[-1][1].startswith("$")
        second = read_account(state_dir)
        assert second is not None and second.access_token != first.access_token
        assert read_sync_state(state_dir).since is not None
    finally:
        await matrix.aclose()
        await person.close()
        await admin.aclose()


async def test_signing_out_kills_every_token_and_keeps_the_account(
    synapse: Synapse, tmp_path: Path
) -> None:
    """[matrix] taken away from an agent: the coordinator signs its account out everywhere
    (the tokens its host kept die); enabling it again signs in afresh."""
    from hyperhive.matrix.admin import sign_out_agent

    secret = synapse.write_secret(tmp_path / "secret")
    config = _config(synapse, tmp_path, registration_shared_secret_file=secret)
    admin = MatrixAdmin(config)
    try:
        first = await admin.provision("eve")
        second = await admin.provision("eve")
        assert await admin.sign_out("eve") == 2
        assert _whoami(synapse, first.access_token) == 401
        assert _whoami(synapse, second.access_token) == 401
        again = await admin.provision("eve")  # enabled again: the account is still its own
        assert again.user_id == first.user_id and _whoami(synapse, again.access_token) == 200
        assert await sign_out_agent(config, "eve") is None
        assert _whoami(synapse, again.access_token) == 401
        assert await admin.sign_out("nobody-here") == 0
    finally:
        await admin.aclose()
