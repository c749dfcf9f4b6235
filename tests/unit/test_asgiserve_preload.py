"""uvicorn's start-time imports happen when ``hyperhive.asgiserve`` is imported.

``uvicorn.Config.load()`` imports its protocol and lifespan modules when a server
starts; on the coordinator that is after it says it is up, ~0.4 s of a blocked
event loop. The dashboard's module is imported on a worker thread instead, and it
brings these with it. (A lint autofix once dropped them as unused.)
"""

from __future__ import annotations

import subprocess
import sys

PRELOADED = (
    "uvicorn.lifespan.on",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.websockets.auto",
)


def test_importing_the_dashboards_server_loads_what_uvicorn_would_load_on_the_loop() -> None:
    check = (
        "import sys, hyperhive.core.api.dashboard.server\n"
        f"missing = [m for m in {PRELOADED!r} if m not in sys.modules]\n"
        "print(missing)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
