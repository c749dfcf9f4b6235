"""May this host speak for that agent? The node-authorizer rule, as a pure function.

Pure module: no I/O. Kubernetes' node authorizer lets a kubelet act only for
the pods bound to its node; here a host may forward an agent's frame only
while the coordinator has that agent placed on it, at the activation
incarnation it was given. A host that lost the agent (moved, stopped, a newer
activation) is refused, so a compromised or stale host can never speak as
another host's agent.
"""

from __future__ import annotations

__all__ = ["forward_refusal"]


def forward_refusal(
    host: str, agent: str, incarnation: int, holder: str | None, current: int | None
) -> str | None:
    """Why ``host`` may not forward for ``agent`` at ``incarnation`` (``None``: it may).

    ``holder`` is the host the coordinator placed ``agent`` on, ``current``
    the incarnation it activated it with (``None`` when not running).
    """
    if holder is None:
        return f"agent {agent!r} is not running on any host"
    if holder != host:
        return f"agent {agent!r} is held by another host, not by {host!r}"
    if current != incarnation:
        return (
            f"agent {agent!r} is at incarnation {current}, not {incarnation}: this host's "
            "activation is stale"
        )
    return None
