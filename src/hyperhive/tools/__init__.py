"""Every MCP tool the hive serves, declared once.

One :class:`~hyperhive.tools.decl.Tool` per tool (name, server, group or
capability, argument model, result, and for a ``hyperhive`` tool the
coordinator request it becomes and the text the model reads), grouped one
module per tool group; :mod:`hyperhive.tools.catalog` collects them. The
permissions table, the MCP surfaces, the coordinator's gate, the dashboard
and ``docs/tools.md`` all read that catalog, so a tool has no second list.

Pure declarations: nothing here imports the agent host. A surface binds the
host-local handlers (bash tasks, subagents, the forge) by tool name.
"""

__all__: list[str] = []
