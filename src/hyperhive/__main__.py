"""``python -m hyperhive`` is ``hivectl``."""

from hyperhive.cli import main

main(prog_name="hivectl")
