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
``wire``…), whose ``__all__`` this package re-exports: callers import from
``hyperhive.protocol``.
"""

from hyperhive.protocol import (
    agent,
    agenthosts,
    approvals,
    budget,
    events,
    follow,
    host,
    link,
    mail,
    move,
    snapshot,
    steer,
    wire,
)
from hyperhive.protocol.agent import *  # noqa: F403
from hyperhive.protocol.agenthosts import *  # noqa: F403
from hyperhive.protocol.approvals import *  # noqa: F403
from hyperhive.protocol.base import (
    TRACEPARENT_PATTERN,
    Acked,
    AgentDestroyed,
    AgentMeta,
    AgentRunning,
    AgentStopped,
    ApprovalRequested,
    Cancelled,
    CompactQueued,
    Created,
    LifecycleResult,
    LogTail,
    LooseEnd,
    LooseEndKind,
    MatrixAccount,
    MatrixAccountView,
    Message,
    Req,
    RequestId,
    RowId,
    Sent,
    TurnStateName,
    WaitResult,
    result_adapter,
    result_type,
)
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

# base's public names (its _Out and _Req are the other modules' own), then each module's.
__all__ = [
    "TRACEPARENT_PATTERN",
    "Acked",
    "AgentDestroyed",
    "AgentMeta",
    "AgentRunning",
    "AgentStopped",
    "ApprovalRequested",
    "Cancelled",
    "CompactQueued",
    "Created",
    "LifecycleResult",
    "LogTail",
    "LooseEnd",
    "LooseEndKind",
    "MatrixAccount",
    "MatrixAccountView",
    "Message",
    "Req",
    "RequestId",
    "RowId",
    "Sent",
    "TurnStateName",
    "WaitResult",
    "result_adapter",
    "result_type",
]
__all__ += agent.__all__
__all__ += agenthosts.__all__
__all__ += approvals.__all__
__all__ += budget.__all__
__all__ += events.__all__
__all__ += follow.__all__
__all__ += host.__all__
__all__ += link.__all__
__all__ += mail.__all__
__all__ += move.__all__
__all__ += snapshot.__all__
__all__ += steer.__all__
__all__ += wire.__all__
