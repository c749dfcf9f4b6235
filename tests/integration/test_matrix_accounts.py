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
