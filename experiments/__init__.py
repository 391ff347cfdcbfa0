"""Experiments, in subpackages by job: run/ (the lifecycle, runner, agents, captures),
dataplanes/ (targets, eBPF switch, twin, reroute), scenarios/ (the shipped files and
their model), faults/ (one class per fault kind), analysis/ (metrics, report, plots),
interactive/ (make cli, p4shell) and paper/ (make paper). The top of the import graph:
nothing imports it but entry points, tests, labs and benchmarks."""
