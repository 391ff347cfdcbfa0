"""Running an experiment: the lifecycle every entry point shares (pre-flight, lock,
bring-up, teardown), the runner, the host agents, captures, the calibrated rate cap and
the path check."""
