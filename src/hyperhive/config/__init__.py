"""Configuration: an agent's ``agent.toml``, the hive's ``hive.toml``, and paths.

Both files are validated with pydantic; a bad file raises ``ConfigError``
naming the file, the line and what is wrong. The hive's home is ``--home``,
else ``HIVE_HOME``, else ``~/.local/share/hyperhive``.

One module per part, all re-exported here: ``agent`` (``agent.toml``), ``mcp``
(its MCP server entries), ``hive`` (``hive.toml``), ``files`` (reading and
writing them), ``paths`` (the home and its layout), ``fields`` (what the models
share).
"""

from __future__ import annotations

from hyperhive.config.agent import AgentConfig, ResourceLimits
from hyperhive.config.fields import Effort
from hyperhive.config.files import (
    STORE_URL_ENV,
    dump_agent_config,
    load_agent_config,
    load_hive_config,
    parse_agent_config,
)
from hyperhive.config.hive import HiveConfig
from hyperhive.config.mcp import DEFAULT_MCP_SERVERS, McpServer, allowed_by_server
from hyperhive.config.paths import HOME_ENV, HivePaths, resolve_home
from hyperhive.permissions import SUBAGENT_SERVER
from hyperhive.tools.decl import MATRIX_SERVER

__all__ = [
    "DEFAULT_MCP_SERVERS",
    "HOME_ENV",
    "MATRIX_SERVER",
    "STORE_URL_ENV",
    "SUBAGENT_SERVER",
    "AgentConfig",
    "Effort",
    "HiveConfig",
    "HivePaths",
    "McpServer",
    "ResourceLimits",
    "allowed_by_server",
    "dump_agent_config",
    "load_agent_config",
    "load_hive_config",
    "parse_agent_config",
    "resolve_home",
]
