"""The image suite: the images scripts/image builds, run under Podman.

The session's first test builds the images (quick when nothing changed: cached base,
layer cache), and removes what a killed earlier run of this suite left in Podman.
"""

from __future__ import annotations

import shutil

import pytest

from tests.support.podman import build_images, sweep_strays


@pytest.fixture(scope="session")
def images() -> str:
    """``scripts/image``'s output (the images' sizes): built, or found up to date."""
    for tool in ("podman", "mmdebstrap", "kubectl"):
        assert shutil.which(tool), f"{tool} is missing: scripts/bootstrap --dev installs it"
    sweep_strays()
    return build_images()
