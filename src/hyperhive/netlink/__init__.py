"""Agent hosts on other machines: the host link over TCP (TLS) WebSocket.

A remote host dials out to the coordinator, authenticates with its own
credential (``hivectl hosts add``), and carries every agent it holds over
that one connection; each agent's socket is served by the host and its frames
are forwarded, tagged with the agent's name and activation incarnation.
"""
