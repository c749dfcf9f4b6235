"""Matrix: agents' accounts on the hive's homeserver, their ``mcp__matrix__*`` tools, and
the ``/sync`` watcher that wakes them.

Self-contained like :mod:`hyperhive.forge`: config (``[matrix]``), the
homeserver's admin side (provisioning, deactivation), an agent's identity on
disk, pure wake rules, the watcher, and the MCP surface's tools.
"""
