"""Background bash tasks for agents (spec 001): the task manager and, later, its MCP surface."""
