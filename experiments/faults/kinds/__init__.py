"""The fault kinds, one module per family; every module here is imported by
experiments/faults/__init__.py, so a new kind is a new class in any of them (or in a
new module), and nothing else changes."""
