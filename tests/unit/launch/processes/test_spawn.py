"""Starting a worker: the priority its session gets (``spawn.share_priority``). The rest of
``spawn_worker`` runs in every launcher test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lightning_hpo.launch.processes.spawn import share_priority

_AUTOGROUPS = Path("/proc/self/autogroup").exists()

# A process ``nice`` steps nicer than the tests that starts a child in a session of its own, as
# spawn_worker does, and prints its own nice and the child's autogroup nice before and after
# share_priority.
_PARENT = """
import os, subprocess, sys
from pathlib import Path
from lightning_hpo.launch.processes.spawn import share_priority
nice = os.nice(int(sys.argv[1]))
child = subprocess.Popen([sys.executable, "-c", "input()"], stdin=subprocess.PIPE,
                         start_new_session=True)
before = Path(f"/proc/{child.pid}/autogroup").read_text().split()[-1]
share_priority(child.pid)
after = Path(f"/proc/{child.pid}/autogroup").read_text().split()[-1]
child.communicate(b"\\n")
print(nice, before, after)
"""


@pytest.mark.skipif(not _AUTOGROUPS, reason="this kernel schedules no autogroups")
@pytest.mark.parametrize("nice", [3, 9])
def test_a_niced_launchers_worker_session_is_scheduled_at_its_nice(nice: int) -> None:
    """A new session's autogroup starts at nice 0 (the kernel's rule, which made a niced
    launcher's workers run at the normal priority); it gets the parent's nice."""
    ours, before, after = subprocess.run(
        [sys.executable, "-c", _PARENT, str(nice)], capture_output=True, text=True, check=True,
        timeout=60).stdout.split()
    assert int(ours) >= nice and (before, after) == ("0", ours)


def test_a_process_gone_or_never_there_is_no_error() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    child.wait()
    share_priority(child.pid)  # gone
    share_priority(2**22 + 12345)  # above the kernel's largest pid
