"""Performance figures of the testbed, not tests: run from the repository root as
`python -m bench.<module>` (see docs/running.md)."""
