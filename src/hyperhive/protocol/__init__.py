"""Typed wire models: one schema for every socket and HTTP boundary.

Requests are discriminated unions on ``cmd`` and carry an optional request
``id`` echoed in the ``Response``. Each request class names its response
model (``class SendReq(Req[Sent])``): ``RpcClient.call`` returns that type, and
the servers' dispatch tables check at import that each handler returns it.
Requests forbid unknown fields, so a ``from`` smuggled into an agent's
``send`` is refused rather than ignored: who is asking is always the socket
(or token) a request came in on.

- ``AgentRequest``: an agent's own socket (harness, MCP surfaces, in-sandbox
  producers).
- ``HostRequest``: the operator socket (``hivectl``, dashboard).
- ``LinkRequest`` / ``LinkCommand``: the agent-host link (host → coordinator
  requests; coordinator → host pushed commands).
- ``HelperEvent``: lifecycle notices delivered to the submitting agent.

Each concept has its module (``agent``, ``host`` and the operator's ``mail``,
``approvals`` and ``agenthosts``, ``link``, ``move``, ``snapshot``, ``events``,
``wire``…). This package re-exports each one's ``__all__``: callers import
from ``hyperhive.protocol``.
"""

# Star imports of modules that each name their ``__all__``: a star import re-exports
# for mypy too, which would read a package ``__all__`` built from theirs as empty (it
# reads only literal lists), so this package keeps none of its own.
from hyperhive.protocol.agent import *  # noqa: F403
from hyperhive.protocol.agenthosts import *  # noqa: F403
from hyperhive.protocol.approvals import *  # noqa: F403
from hyperhive.protocol.base import *  # noqa: F403
from hyperhive.protocol.budget import *  # noqa: F403
from hyperhive.protocol.events import *  # noqa: F403
from hyperhive.protocol.follow import *  # noqa: F403
from hyperhive.protocol.host import *  # noqa: F403
from hyperhive.protocol.link import *  # noqa: F403
from hyperhive.protocol.mail import *  # noqa: F403
from hyperhive.protocol.move import *  # noqa: F403
from hyperhive.protocol.snapshot import *  # noqa: F403
from hyperhive.protocol.steer import *  # noqa: F403
from hyperhive.protocol.wire import *  # noqa: F403
