"""What a run's records say: metrics, slowdowns, the proportions beside the paper's
regime and whether the machine kept up, computed without I/O; the agents' event logs
read (`metrics.read_events`); plots and report.md written to the paths given."""
