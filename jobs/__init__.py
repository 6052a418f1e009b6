"""Ray jobs, started with `ray job submit -- python -m jobs.<name>`."""
