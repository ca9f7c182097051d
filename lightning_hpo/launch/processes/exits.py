"""Leave a process that imported torch and Lightning without the interpreter's teardown.

Freeing the modules of torch and Lightning takes seconds at exit, and the launcher waits for
each worker to exit before it prints its summary, and the user's shell waits for the launcher.
:func:`fast_exit` runs what must run (the ``atexit`` handlers, such as the removal of the DDP
channel's temporary folder; logging's flush) and then ends the process at once. Only the
command-line entry points call it: a library function never ends its caller.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys


def fast_exit(code: int) -> None:
    """Run the ``atexit`` handlers, flush logging and the standard streams, then
    ``os._exit(code)`` (no module teardown).

    Example (in a ``__main__`` block)::

        if __name__ == "__main__":
            fast_exit(main())
    """
    try:
        atexit._run_exitfuncs()
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)
