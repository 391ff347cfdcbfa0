"""Scenarios: the shipped files (`*.yaml`, beside these modules), the model that checks
one against a topology, roles that name nodes per topology, and the workloads (pure)."""
