"""The hive's forge (Forgejo or Gitea): agents' users, tokens, repositories, notifications.

Self-contained so the ``create_repo`` declaration can move with it: config
(``[forge]``), the typed API client, pure rules, the admin service, an agent's
identity on disk, the notification poller and the MCP tool.
"""
