"""The test harness itself: programs the tests start take Ctrl-C however the tests were
started, and no test forks the test process (see ``_support.ctrl_c_reaches_children``)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from _support import TESTS

_CHILD = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"


@pytest.mark.parametrize("reach", [True, False], ids=["made-to-reach", "left-ignored"])
def test_children_take_ctrl_c_when_the_tests_were_started_ignoring_it(reach: bool) -> None:
    """A test process that ignores SIGINT (started with & by a script) starts programs that
    take it once ``ctrl_c_reaches_children`` ran; without it they ignore it too."""
    parent = (
        "import signal, subprocess, sys; sys.path.insert(0, sys.argv[1]); "
        "signal.signal(signal.SIGINT, signal.SIG_IGN); "
        "from _support import ctrl_c_reaches_children; "
        + ("ctrl_c_reaches_children(); " if reach else "")
        + f"print(subprocess.run([sys.executable, '-c', {_CHILD!r}], capture_output=True, "
        "text=True, check=True).stdout, end='')"
    )
    out = subprocess.run([sys.executable, "-c", parent, str(TESTS)], capture_output=True,
                         text=True, check=True, timeout=60).stdout.strip()
    assert out == str(reach)  # Python installs its Ctrl-C handler only where SIGINT is not ignored


def test_no_test_forks_the_test_process() -> None:
    """Once a test has run gRPC in the test process, a fork of it (``preexec_fn``, ``os.fork``,
    or ``subprocess``'s ``user=``/``group=``/``extra_groups=``, which fork as a ``preexec_fn``
    does) may abort the child in gRPC's fork handlers before it runs anything (one in 20
    here): subprocesses are started without them (``_support.as_user`` drops root's rights)."""
    pattern = re.compile(r"preexec_fn\s*=|os\.fork\(|get_context\(\s*[\"']fork|"
                         r"\bextra_groups\W{0,2}\s*[=:]|\buser\s*=\s*\w+\.pw_uid|\bgroup\s*=\s*\w+\.pw_gid")
    found = [
        f"{path.name}:{number}"
        for path in sorted(TESTS.glob("*.py")) if path.name != "test_support.py"
        for number, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)
    ]
    assert found == []
