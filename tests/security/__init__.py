"""The hostile-agent suite: one agent attacks through every surface it can reach."""
