"""What a run's records say (pure): metrics, slowdowns, the proportions beside the
paper's regime, whether the machine kept up, plots and report.md."""
