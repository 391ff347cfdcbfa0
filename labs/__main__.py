"""`python -m labs`: list the labs, start one, check one.

    python -m labs list
    python -m labs start 02              copy the skeleton into labs/lab02_.../work/
    python -m labs check 02              check your work copy
    python -m labs check 02 --solution   check the lab's own solution (or --skeleton)
    python -m labs reading 02            write the lab's reading copy of the P4 program
                                         again (labs/lab02_.../work/reading/)
    python -m labs program 02 OUT        build the lab's P4 program from your work copy
                                         (--solution: the solution's) into OUT; prints
                                         its main file (`make cli LAB=02` runs it)

Exit status: 0 the lab passes, 1 it does not yet, 2 a usage mistake (one line).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from labs.course import (
    LABS,
    REPO,
    LabError,
    check_module,
    files_dir,
    lab_dir,
    lab_number,
    start,
)
from topologies.errors import UserError


def run_check(argv: list[str], number: str | None = None) -> int:
    """Parse the check's options (the lab's own too) and print its report."""
    parser = argparse.ArgumentParser(prog="python -m labs check",
                                     description="check a lab's files")
    if number is None:
        parser.add_argument("lab", help="lab number, e.g. 02")
        known, _ = parser.parse_known_args(argv)
        number = lab_number(known.lab)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--solution", dest="copy", action="store_const", const="solution",
                       default="work", help="check the lab's solution instead of your work")
    which.add_argument("--skeleton", dest="copy", action="store_const", const="skeleton",
                       help="check the untouched skeleton (it must fail)")
    module = check_module(number)
    if hasattr(module, "add_arguments"):
        module.add_arguments(parser)
    options = parser.parse_args(argv)
    report = module.check(files_dir(number, options.copy), options)
    print(report.render())
    return 0 if report.passed else 1


def p4_program(command: str, argv: list[str]) -> int:
    """`reading NN`: the lab's reading copy into its work copy; `program NN OUT
    [--solution]`: the lab's program from the student's (or the solution's) pieces."""
    from labs.p4lab import PIECES, PieceNotFound, build_program, reading_copy

    parser = argparse.ArgumentParser(prog=f"python -m labs {command}")
    parser.add_argument("lab", help="a P4 lab: " + ", ".join(PIECES))
    if command == "program":
        parser.add_argument("out", type=Path, help="the folder to build the program in")
        parser.add_argument("--solution", action="store_true",
                            help="the lab's solution instead of your work copy")
    args = parser.parse_args(argv)
    number = lab_number(args.lab)
    if number not in PIECES:
        raise LabError(f"LAB={args.lab}: lab {number} has no P4 program; fix: use one of "
                       f"{', '.join(PIECES)}")
    try:
        if command == "reading":
            main = reading_copy(number, files_dir(number) / "reading")
        else:
            source = files_dir(number, "solution" if args.solution else "work")
            main = build_program({number: source}, args.out.resolve() / "p4src")
    except (PieceNotFound, OSError) as err:
        raise LabError(f"lab {number}: the program cannot be built ({err}); fix: copy the "
                       "missing file back from the lab's skeleton/") from None
    print(main)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command, rest = (argv[0], argv[1:]) if argv else ("list", [])
    try:
        if command == "list":
            for number, package in LABS.items():
                title = (lab_dir(number) / "README.md").read_text().splitlines()[0]
                print(f"{number}  {title.lstrip('# ')}  (labs/{package})")
            return 0
        if command == "start" and len(rest) == 1:
            number = lab_number(rest[0])
            work = start(number)
            print(f"your copy: {work.relative_to(REPO)} (complete its TODOs, then: "
                  f"make lab-check LAB={number})")
            return 0
        if command == "check" and rest and not rest[0].startswith("-"):
            return run_check(rest)
        if command in ("reading", "program"):
            return p4_program(command, rest)
    except (LabError, UserError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("error: usage: python -m labs list | start NN | check NN [--solution | --skeleton] "
          "| reading NN | program NN OUT [--solution] (make lab-start LAB=NN, make "
          "lab-check LAB=NN)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
