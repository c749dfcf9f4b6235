"""The operator socket's API: ``base`` is the context each handler gets (``OperatorApi``)
and the agents view; each other module holds one concern's handlers, registered on
``OPERATOR_TABLE``, which is sealed here once they all are (an import of this package
fails, naming the gap, when a request of the socket has no handler).
"""

from hyperhive.core.api.operator_api import approvals, hosts, loose_ends, mail, reads, tree, turns
from hyperhive.core.api.operator_api.base import OPERATOR_TABLE, OperatorApi

__all__ = ["OPERATOR_TABLE", "OperatorApi"]

# The handler modules, imported for their registrations.
_HANDLERS = (approvals, hosts, loose_ends, mail, reads, tree, turns)

OPERATOR_TABLE.seal()
