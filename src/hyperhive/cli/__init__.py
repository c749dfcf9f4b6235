"""``hivectl``: the operator's command line.

Every read command takes ``--json`` (stable shapes, documented in
``docs/cli-json.md``); errors are one line on stderr and a non-zero exit.
"""

from hyperhive.cli import (  # noqa: F401  (register commands)
    agents,
    approvals,
    budget,
    choom,
    dashboard,
    doctor,
    hosts,
    install,
    login,
    messages,
    run,
    turns,
)
from hyperhive.cli.base import main

__all__ = ["main"]
