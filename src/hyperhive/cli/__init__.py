"""``hivectl``: the operator's command line.

Every command prints one documented shape under ``--json`` (``docs/cli-json.md``);
an error is one line on stderr and the exit code of its class (``cli/exits.py``).
"""

from hyperhive.cli import (  # noqa: F401  (register commands)
    activity,
    agents,
    approvals,
    budget,
    choom,
    dashboard,
    doctor,
    down,
    hosts,
    install,
    login,
    messages,
    move,
    perms,
    run,
)
from hyperhive.cli.base import main

__all__ = ["main"]
