"""The operator's view of an agent's forge: its user and the repositories it can push to.

Read from the forge itself with the admin token (the forge is the truth; the
hive keeps no copy to drift). Never raises: a forge that is down or slow must
not break the agent's page, so the problem is part of the view.
"""

from __future__ import annotations

import anyio
from pydantic import BaseModel

from hyperhive.errors import HiveError, NotFound
from hyperhive.forge.config import ForgeConfig
from hyperhive.forge.service import Forge

__all__ = ["VIEW_TIMEOUT", "AgentForgeView", "forge_view"]

VIEW_TIMEOUT = 5.0


class AgentForgeView(BaseModel):
    granted: bool
    configured: bool
    url: str | None = None
    org: str | None = None
    user: str | None = None
    user_url: str | None = None
    active: bool | None = None
    repos: list[str] = []
    problem: str | None = None

    def lines(self) -> list[str]:
        """Plain-text rendering (``hivectl agents show``)."""
        if not self.granted:
            return ["forge: not granted (no 'forge' tool group)"]
        if not self.configured:
            return ["forge: granted, but no [forge] in hive.toml"]
        out = [f"forge: {self.url} (org {self.org})"]
        state = "" if self.active is None else (" active" if self.active else " disabled")
        out.append(f"  user: {self.user or '-'}{state}")
        out.extend(f"  repo: {self.url}/{r}" for r in self.repos)
        if self.problem:
            out.append(f"  problem: {self.problem}")
        return out


async def forge_view(config: ForgeConfig | None, agent: str, granted: bool) -> AgentForgeView:
    if not granted or config is None:
        return AgentForgeView(granted=granted, configured=config is not None)
    view = AgentForgeView(granted=True, configured=True, url=config.url, org=config.org)
    username = config.username(agent)
    try:
        forge = Forge.from_config(config)
    except HiveError as exc:
        return view.model_copy(update={"problem": exc.message})
    try:
        with anyio.fail_after(VIEW_TIMEOUT):
            try:
                async with forge.admin.guard(f"looking up {username}", missing="no user"):
                    user = await forge.admin.users.get(username)
            except NotFound:
                return view.model_copy(
                    update={
                        "problem": "no forge user yet (provisioned when the agent is activated)"
                    }
                )
            repos = await forge.repos_of(agent)
        return view.model_copy(
            update={
                "user": user.login,
                "user_url": f"{config.url}/{user.login}",
                "active": bool(user.active) and not user.prohibit_login,
                "repos": repos,
            }
        )
    except HiveError as exc:
        return view.model_copy(update={"user": username, "problem": exc.message})
    except TimeoutError:
        return view.model_copy(
            update={"user": username, "problem": f"the forge did not answer in {VIEW_TIMEOUT:.0f}s"}
        )
    finally:
        await forge.aclose()
