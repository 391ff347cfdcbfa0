"""Topologies: the YAML files, the fabric model and its validation, the addressing plan,
the path catalogue and the resolved-topology file (the bottom of the import graph), and
the Mininet side that runs what it is given: network, node classes, link shaping, link
state, the eBPF port runner (tests/unit/test_import_layers.py states the layers)."""
