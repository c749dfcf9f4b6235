"""A coordinator stopping while an agent host registers still exits.

The coordinator runs the way ``hivectl serve`` runs it: its own event loop
(``anyio.run``) in a thread, which returns only once every task of that loop
is done. A real host dials the network link (loopback, a real credential) and
registers; the registration starts the hive's agents on it, one store write
after another, and the coordinator is stopped in the middle of that. It used
to leave the link's connection handler behind, still at the store, which it
then closed under it: the handler waited forever, and the loop's exit with it.
"""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from hyperhive.config import AgentConfig, HivePaths
from hyperhive.core.coordinator import Coordinator
from hyperhive.netlink.dialer import LinkTarget, dial
from hyperhive.protocol import LinkRegisterReq
from tests.support.hive import hive_config, operator, seed_home
from tests.support.hostlink import Pushes, add_host, link_url

pytestmark = pytest.mark.anyio

# Enough agents that starting them on the host is still going when the stop comes, even
# on a store that commits in microseconds (each start is a write, then a push).
AGENTS = 120
# The bound on the coordinator's exit (its link handlers get 10 s, then are cancelled).
EXITS_WITHIN = 60.0


class ServeThread(threading.Thread):
    """A coordinator in its own event loop, as ``hivectl serve`` runs one, until ``stop``."""

    def __init__(self, home: Path) -> None:
        super().__init__(name="coordinator", daemon=True)
        self.home = home
        self.up = threading.Event()
        self.stop = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        async def main() -> None:
            coordinator = await Coordinator.open(HivePaths(self.home), hive_config(self.home))
            async with anyio.create_task_group() as tg:
                await tg.start(coordinator.run)
                self.up.set()
                await anyio.to_thread.run_sync(self.stop.wait)
                tg.cancel_scope.cancel()

        try:
            anyio.run(main)
        except BaseException as exc:  # reported by the test, not lost in this thread
            self.failure = exc
        finally:
            self.up.set()


async def test_a_coordinator_stopping_while_a_host_registers_exits(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    configs = {f"a{i:02d}": AgentConfig() for i in range(AGENTS)}
    seed_home(
        tmp_path,
        configs,
        hive_toml='hostlink = { listen = "127.0.0.1:0", lease_seconds = 30 }\n',
        store_url=hive_store_url,
    )
    serving = ServeThread(tmp_path)
    serving.start()
    try:
        await anyio.to_thread.run_sync(serving.up.wait)
        assert serving.failure is None, serving.failure
        paths = HivePaths(tmp_path)
        async with operator(paths) as op:
            credential = await add_host(op, "h1", tmp_path / "creds")
        target = LinkTarget(link_url(paths), "h1", credential)
        pushes = Pushes()
        async with dial(target, on_push=pushes) as link:
            await link.call(LinkRegisterReq(cmd="register", host_id="h1"))
            # The first agent is started: the registration is at the store now.
            await pushes.activation("a00")
            serving.stop.set()
            await anyio.to_thread.run_sync(serving.join, EXITS_WITHIN)
            assert not serving.is_alive(), f"the coordinator did not exit in {EXITS_WITHIN} s"
            assert serving.failure is None, serving.failure
            # It did stop in the middle: not every agent had been started.
            started = {f["agent"] for f in pushes.frames if f.get("cmd") == "activate"}
            assert 0 < len(started) < AGENTS, started
    finally:
        serving.stop.set()
