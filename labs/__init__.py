"""The lab course: short exercises in the p4lang/tutorials shape (see labs/README.md).

Every lab is a package `labs.labNN_<topic>` with a README, a `skeleton/` the student
copies and completes, a `solution/`, and a `check` module. `python -m labs` starts a lab
and runs its check; `labs.course` knows where each lab and its files are.
"""
