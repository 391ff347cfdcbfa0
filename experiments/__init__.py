"""Experiments: scenarios, the data-plane targets, bring-up, faults, workloads, the
runner and its results (summary, events, plots, report), captures, the interactive CLI
and the machine's one-fabric lock. The top of the import graph: nothing imports it but
entry points, tests, labs and benchmarks."""
