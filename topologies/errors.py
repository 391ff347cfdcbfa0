"""The one base class of user mistakes: a bad file, field or setting, said in one line.

Every error a user can fix by editing an input (a topology or scenario file, a protocol
setting, a command-line value) derives from `UserError`, which carries where the mistake
is (`source`: a file or an option), which field, what is wrong and how to fix it. Entry
points catch `UserError` alone and print its one line; anything else is a bug and keeps
its traceback. It lives at the bottom of the import graph so that every layer can
raise it.
"""

from __future__ import annotations


class UserError(ValueError):
    """A mistake in the user's input, as one line: `source: field: problem; fix: fix`."""

    def __init__(self, source: str, fieldname: str, problem: str, fix: str):
        self.source, self.field, self.problem, self.fix = source, fieldname, problem, fix
        super().__init__(f"{source}: {fieldname}: {problem}; fix: {fix}")
