"""The argument parser of our command-line tools: a refusal is one ``error: ...`` line, exit 2.

argparse answers a mistyped flag, a flag without its value or a value its type refuses with
its usage block (several lines) and ``prog: error: ...``; every other refusal of our tools is
one line naming the field, ``error: FIELD: what is wrong``, with any password masked, and exit
code 2 (:data:`~lightning_hpo.errors.EXIT_BAD_INPUT`). :class:`OneLineParser` says argparse's
refusals the same way: ``argument --top: ...`` becomes ``top: ...``, an unknown argument lists
the options there are, and a URL's password (``postgresql://user:secret@host/db`` given where
no flag takes it) is masked. ``--help`` is argparse's own.

Parsing the command line also makes standard output print what its encoding can take
(:func:`replace_unencodable`): under ``PYTHONIOENCODING=ascii`` or an ASCII locale, a study
named ``étude-μ`` is printed ``?tude-?`` instead of ending the command with a traceback.

Example::

    >>> parser = OneLineParser(prog="demo")
    >>> _ = parser.add_argument("--top", type=int, metavar="N")
    >>> one_line("argument --top: invalid int value: 'x'", parser.options)
    "top: must be a whole number, not 'x'"
    >>> one_line("argument --top: expected one argument", parser.options)
    'top: needs a value (--top N)'
    >>> one_line("unrecognized arguments: postgresql://u:secret@db/x", parser.options)
    'unrecognized arguments: postgresql://u:***@db/x (the options: --top N; --help explains them)'
"""

from __future__ import annotations

import argparse
import codecs
import re
import sys
from collections.abc import Mapping
from typing import Any, NoReturn

from lightning_hpo.errors import EXIT_BAD_INPUT

__all__ = ["OneLineParser", "one_line", "replace_unencodable"]

# argparse's "argument --top/-t: ..." (an option) or "argument config: ..." (a positional)
_ARGUMENT = re.compile(r"^argument (?P<names>[^\s:]+): ")


class OneLineParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose refusals are one masked ``error: ...`` line on stderr
    and exit code 2, as every other refusal of our tools (see the module).

    Attributes:
        options: each option as it is written (``--top N``, ``--quiet``), in the order they
            were added, ``--help`` left out: what a refusal lists as allowed.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.options: dict[str, str] = {}  # set before argparse adds --help by add_argument
        self._argv: list[str] = []  # what parse_args was given
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        names = action.option_strings
        if names and action.dest != "help":
            name = next((n for n in names if n.startswith("--")), names[0])
            self.options[name.lstrip("-")] = _written(name, action)
        elif not names:  # a positional: listed as it is written, first among the options
            metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
            self.options[action.dest] = f"{metavar} (no flag)"
        return action

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        """argparse's, once standard output prints what it can (:func:`replace_unencodable`):
        every tool of ours parses its command line first, ``--help`` included."""
        replace_unencodable()
        self._argv = [str(arg) for arg in (sys.argv[1:] if args is None else args)]
        return super().parse_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        """Print ``error: <one line>`` (:func:`one_line`) on stderr and exit with code 2.

        argparse names a missing positional before an unknown option (``--bogus`` alone reads
        "the following arguments are required: storage"): the unknown option is named first.
        """
        if message.startswith("the following arguments are required"):
            known = {name for action in self._actions for name in action.option_strings}
            unknown = [arg for arg in self._argv
                       if arg.startswith("-") and arg.split("=", 1)[0] not in known]
            if unknown:
                message = f"unrecognized arguments: {' '.join(unknown)}"
        self.exit(EXIT_BAD_INPUT, f"error: {one_line(message, self.options)}\n")


def replace_unencodable() -> None:
    """Make ``sys.stdout`` replace the characters its encoding cannot take with ``?``.

    Python's standard output raises ``UnicodeEncodeError`` for a character its encoding lacks
    (``PYTHONIOENCODING=ascii``, a ``C`` locale): a study, path or value named in another script
    then stopped a report or a launcher's display midway, with a traceback (standard error
    already writes ``\\xe9``). An encoding that takes every character (UTF-8), an error handler
    the user chose (``PYTHONIOENCODING=ascii:backslashreplace``) and a stream that cannot be
    reconfigured (a test's capture) are left as they are.
    """
    stream = sys.stdout
    reconfigure = getattr(stream, "reconfigure", None)
    encoding = getattr(stream, "encoding", None)
    if reconfigure is None or getattr(stream, "errors", None) != "strict" or not encoding:
        return
    try:
        if codecs.lookup(encoding).name.startswith("utf-"):
            return
        reconfigure(errors="replace")
    except (LookupError, ValueError, OSError):  # an unknown codec, a closed or detached stream
        return


def _written(name: str, action: argparse.Action) -> str:
    """``--top N``, ``--compare STUDY ...``, ``--quiet``: an option as one writes it."""
    if action.nargs == 0:
        return name
    metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    return f"{name} {metavar}{' ...' if action.nargs in ('+', '*') else ''}"


def one_line(message: str, options: Mapping[str, str] | None = None) -> str:
    """argparse's refusal ``message`` as our tools say one: ``FIELD: what`` on one line, a
    value missing followed by how the option is written, an unknown argument followed by the
    ``options`` there are (field -> how it is written), any URL password masked."""
    from lightning_hpo.storage import mask_text  # only when refusing: it imports Optuna

    options = options or {}
    written = ""
    match = _ARGUMENT.match(message)
    if match:
        names = match.group("names").split("/")
        field = next((n for n in names if n.startswith("--")), names[0]).lstrip("-")
        message = f"{field}: {message[match.end():]}"
        written = f" ({options[field]})" if field in options else ""
    text = re.sub(r": expected (one|at least one) argument$",
                  lambda m: f": needs {'a value' if m.group(1) == 'one' else 'a value or more'}"
                  f"{written}", message)
    text = re.sub(r": invalid int value: ", ": must be a whole number, not ", text)
    text = re.sub(r": invalid float value: ", ": must be a number, not ", text)
    if text.startswith("unrecognized arguments:") and options:
        text += f" (the options: {', '.join(options.values())}; --help explains them)"
    return " ".join(mask_text(text, "").split())
