"""The surfaces: the agent and operator APIs, the operator's followers, the dashboard."""
