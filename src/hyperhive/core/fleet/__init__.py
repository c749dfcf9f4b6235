"""Agent hosts: who runs which agent, placement, moves, and agents' directories and
logs, reached through their host."""
