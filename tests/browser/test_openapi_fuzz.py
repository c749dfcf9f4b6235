"""schemathesis against a running ``hivectl serve``'s dashboard: its OpenAPI
document is honest enough to fuzz, and nothing it accepts makes a 500.

Bounded: a handful of examples per operation, so the whole run stays well
under a minute. The event streams never end, so they are left out.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from hyperhive.config import AgentConfig
from tests.support.hive import seed_home, start_serve
from tests.support.waits import wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[schemathesis.BaseSchema]:
    home = tmp_path_factory.mktemp("fuzz")
    seed_home(
        home,
        {"queen": AgentConfig(), "alice": AgentConfig()},
        {"queen": None, "alice": "queen"},
        hive_toml='runtime = "unsandboxed"\ndashboard_port = 0\ndashboard_auth = "loopback"\n',
    )
    proc = start_serve(home)
    try:
        record = home / "run" / "dashboard.json"

        def up() -> bool:
            assert proc.poll() is None, "hivectl serve exited"
            return record.exists()

        wait_until(up, 20, "the dashboard's record")
        url = json.loads(record.read_text())["url"]
        schema = schemathesis.openapi.from_url(f"{url}/openapi.json", wait_for_schema=10)
        yield schema.exclude(path_regex=r"/events$")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, (Path(home) / "serve.log").read_text()


def test_no_server_errors(api_schema: schemathesis.BaseSchema) -> None:
    # Driven by hand (not schemathesis' pytest plugin, which lags pytest's internals).
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) > 20
    failures: list[str] = []
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), database=None
        )
        def check(case: schemathesis.Case) -> None:
            case.call_and_validate(checks=[not_a_server_error])

        try:
            check()
        except Exception as exc:  # collect every failing operation, not just the first
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)
