"""Refuse an install that cannot fit, in one line, before pip starts writing into the venv.

``make install`` (and so ``make demo`` / ``make test``) runs this before it installs torch: the
CUDA build of torch with torchvision takes about 6 GiB in a venv, and pip that runs out of space
half-way leaves a broken venv and a long traceback ending in ``[Errno 28]``. When torch is
already importable in the venv (only the package is reinstalled) nothing large is written and
the check passes whatever the space.

Usage: ``python scripts/check_space.py VENV [GIB]``; exit 0 when the filesystem holding ``VENV``
has at least ``GIB`` GiB free (default 7), exit 1 with one line on stderr otherwise.

Example::

    $ .venv/bin/python scripts/check_space.py .venv
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

#: What a venv with the CUDA build of torch 2.14 and torchvision 0.29 takes, with some room (GiB).
NEEDED_GIB = 7.0


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print("usage: check_space.py VENV [GIB]", file=sys.stderr)
        return 2
    venv = Path(argv[0])
    try:
        needed = float(argv[1]) if len(argv) == 2 else NEEDED_GIB
    except ValueError:
        print(f"check_space.py: GIB must be a number of GiB, not {argv[1]!r}", file=sys.stderr)
        return 2
    if importlib.util.find_spec("torch") is not None:
        return 0  # torch is installed already: pip writes only the package (megabytes)
    existing = next(p for p in (venv.absolute(), *venv.absolute().parents) if p.exists())
    free = shutil.disk_usage(existing).free / 2**30  # the filesystem the venv will be made on
    if free < needed:
        print(f"make install: installing torch into {venv} needs about {needed:g} GiB free on its "
              f"filesystem, and {free:.1f} GiB are free; free some space (or set VENV=path on a "
              f"larger disk) and run it again", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
