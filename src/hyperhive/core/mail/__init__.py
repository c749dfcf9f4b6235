"""Messages and what they wake: the broker, schedules, notices to agents, budgets."""
