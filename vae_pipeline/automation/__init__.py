"""How runs are scheduled: what is stale, the planner that turns it into runs, the jobs, sensors and schedule."""
