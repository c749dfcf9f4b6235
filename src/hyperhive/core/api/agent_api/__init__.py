"""The agent socket's API: ``base`` is the context each handler gets (``AgentApi``, bound
to the calling agent) and the gate; each other module holds one concern's handlers,
registered on ``AGENT_TABLE``, which is sealed here once they all are (an import of
this package fails, naming the gap, when a request of the socket has no handler).
"""

from hyperhive.core.api.agent_api import identity, loose_ends, mail, tree, turns
from hyperhive.core.api.agent_api.base import (
    AGENT_TABLE,
    COMPACT_THRESHOLD,
    STATUS_MAX,
    AgentApi,
    gate,
)

__all__ = ["AGENT_TABLE", "COMPACT_THRESHOLD", "STATUS_MAX", "AgentApi", "gate"]

# The handler modules, imported for their registrations.
_HANDLERS = (identity, loose_ends, mail, tree, turns)

AGENT_TABLE.seal()
