"""``python -m hyperhive`` is ``hivectl``."""

from hyperhive.cli import main

main()
