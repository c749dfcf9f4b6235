"""What the hive knows: applied configs, agents' state, loose ends, the activity log,
the meta mirror."""
