"""Pure forge rules: which repository names the forge accepts. No I/O.

Checked before any request, so a bad name is refused with the rule rather
than as the forge's 422. Forgejo's rule: ASCII letters, digits, ``-``,
``_`` and ``.``, at most 100 characters, not ``.``/``..``/``-``, and not
ending in a suffix its web routes own (``.git``, ``.wiki``, ``.rss``, ``.atom``).
"""

from __future__ import annotations

import re

from hyperhive.forge.errors import InvalidRepoName

__all__ = ["REPO_NAME_MAX", "validate_repo_name"]

REPO_NAME_MAX = 100
_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
_RESERVED = frozenset({".", "..", "-"})
_RESERVED_SUFFIXES = (".git", ".wiki", ".rss", ".atom")


def validate_repo_name(name: str) -> str:
    """Return ``name`` if the forge would accept it as a repository name, else raise."""
    if not 1 <= len(name) <= REPO_NAME_MAX:
        raise InvalidRepoName(f"repository name {name!r} must be 1 to {REPO_NAME_MAX} characters")
    if not _NAME_RE.fullmatch(name):
        raise InvalidRepoName(
            f"repository name {name!r} may only use ASCII letters, digits, '-', '_' and '.'"
        )
    if name in _RESERVED:
        raise InvalidRepoName(f"repository name {name!r} is reserved by the forge")
    for suffix in _RESERVED_SUFFIXES:
        if name.lower().endswith(suffix):
            raise InvalidRepoName(
                f"repository name {name!r} may not end in {suffix!r} (the forge's web routes "
                "use that suffix); drop it"
            )
    return name
