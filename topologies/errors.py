"""The one base class of user mistakes: a bad file, field or setting, said in one line.

Every error a user can fix by editing an input (a topology or scenario file, a protocol
setting, a command-line value) derives from `UserError`, which carries where the mistake
is (`source`: a file or an option), which field, what is wrong and how to fix it. Entry
points catch `UserError` alone and print its one line; anything else is a bug and keeps
its traceback. It lives at the bottom of the import graph so that every layer can
raise it.
"""

from __future__ import annotations

import reprlib

# Values quoted back to the user are cut short: a YAML file can nest aliases of lists
# into a structure whose full repr would take hours to print.
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother = 1, 40, 40
_SHOWN.maxlist = _SHOWN.maxdict = _SHOWN.maxtuple = _SHOWN.maxset = 4


def shown(value: object) -> str:
    """A short repr of a user's value, for messages ("got [1, 2, ...]")."""
    return _SHOWN.repr(value)


class UserError(ValueError):
    """A mistake in the user's input, as one line: `source: field: problem; fix: fix`.

    `fieldname` may be empty when the source is itself the setting, as for a
    command-line option (`DATAPLANE=ovs: unknown data plane; fix: ...`).
    """

    def __init__(self, source: str, fieldname: str, problem: str, fix: str):
        self.source, self.field, self.problem, self.fix = source, fieldname, problem, fix
        where = f"{source}: {fieldname}" if fieldname else source
        line = f"{where}: {problem}; fix: {fix}"
        # One printable line whatever the parts hold: a YAML key may contain a newline
        # or a terminal escape, which are shown escaped.
        super().__init__("".join(c if c.isprintable() else repr(c)[1:-1] for c in line))
