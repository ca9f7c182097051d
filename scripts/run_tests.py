"""``make test``: the whole suite in two pytest processes at once, on this machine's two cores.

Most of the suite's time goes to tests that start real processes (launchers, workers, DDP
ranks, a SLURM cluster), and much of it to one process importing torch and Lightning while the
second core waits: run alone, the suite kept 1.26 of 2 cores busy (35 min on a 2-core VM).

- **The timing part** (:data:`TIMING_FILES`: kills, signals, heartbeats, wall-clock budgets,
  DDP, SLURM, concurrent launchers) runs in the foreground, at the normal priority, as it ran
  alone; its progress is printed as it goes.
- **The rest** (configs refused, reports, benchmarks' smoke runs, LightningCLI projects, unit
  tests, the package's docstring examples) runs beside it in a second pytest at nice 10, in a
  session of its own whose autogroup is at nice 10 too, so the timing part keeps the CPU it
  wants and the rest takes what it leaves. (With the kernel's autogroups a new session is
  scheduled at nice 0 whatever its processes' nice: ``tests/helpers/support.py`` gives the launchers
  the tests start in their own sessions the priority of the pytest that starts them.) Its
  output is printed once both parts are done.

The exit status is 0 when both parts pass. Arguments are passed to both pytest runs (``-x``,
``-k expr``...). A file not named in :data:`TIMING_FILES` runs in the rest: a new test file
whose tests depend on timing belongs in the list. :data:`BALANCE_FILES` run in the foreground
too, to make both parts about as long. Both name files by their path under ``tests/``
(``integration/test_launch.py``).

Example::

    python scripts/run_tests.py            # what make test runs
    python -m pytest                       # the same tests in one process, one after another
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The test files whose tests depend on when things happen: processes killed or signalled
#: mid-trial, heartbeats, wall-clock budgets, DDP ranks waiting on each other, SLURM jobs,
#: launchers racing for one study. They run in the foreground at the normal priority.
TIMING_FILES = (
    "integration/test_launch.py", "integration/test_scheduler.py", "integration/test_proxy.py",
    "integration/test_slurm.py", "integration/test_slurm_jobs.py",
    "integration/test_slurm_cluster.py", "integration/test_reliability.py",
    "unit/test_callbacks.py", "unit/test_callbacks_multiobjective.py",
    "unit/distributed/test_distributed.py", "integration/test_ddp.py", "integration/test_load.py",
    "unit/launch/processes/test_early.py", "integration/test_early_start.py",
    "unit/storage/test_journal_lock.py", "integration/test_launch_multiobjective.py",
)

#: Test files that do not depend on timing but run in the foreground part all the same, so
#: that the two parts end together. None now: in a fresh clone on the 2-core VM the timing part
#: took 19 min 2 s and the rest 15 min 8 s with test_checkpointing.py and test_dashboard.py
#: here (about a minute of the timing part's), so they run in the rest again.
BALANCE_FILES: tuple[str, ...] = ()
#: What the foreground part runs.
FOREGROUND_FILES = TIMING_FILES + BALANCE_FILES

#: How much nicer the rest runs than the timing part (``nice -n``): the timing part then gets
#: about 10 CPU-seconds for each one of the rest's where both want the same core.
REST_NICE = 10

_COUNTS = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")


def commands(args: Sequence[str], python: str = sys.executable) -> tuple[list[str], list[str]]:
    """The two pytest command lines: (the timing part, the rest).

    Example::

        >>> timing, rest = commands(["-x"], python="python")
        >>> timing[:4], timing[4], len(timing) == 4 + len(FOREGROUND_FILES)
        (['python', '-m', 'pytest', '-x'], 'tests/integration/test_launch.py', True)
        >>> rest[4:7], rest[-1]
        (['-p', 'no:cacheprovider', 'tests'], 'lightning_hpo')
        >>> rest[7]
        '--ignore=tests/integration/test_launch.py'
    """
    pytest = [python, "-m", "pytest", *args]
    timing = [*pytest, *(f"tests/{name}" for name in FOREGROUND_FILES)]
    # The rest does not write pytest's cache: two processes would write the same files.
    rest = [*pytest, "-p", "no:cacheprovider", "tests",
            *(f"--ignore=tests/{name}" for name in FOREGROUND_FILES), "lightning_hpo"]
    return timing, rest


def counts(output: str) -> dict[str, int]:
    """The counts of pytest's last summary line (``3 passed, 1 skipped in 2.0s``); ``{}`` when
    there is none (pytest was stopped before it).

    Example::

        >>> counts("....\\n=== 3 passed, 1 skipped, 2 warnings in 2.01s ===\\n")
        {'passed': 3, 'skipped': 1}
        >>> counts("=== 1 failed, 2 passed, 1 error in 9s ===")
        {'failed': 1, 'passed': 2, 'error': 1}
        >>> counts("KeyboardInterrupt")
        {}
    """
    for line in reversed(output.splitlines()):
        found = _COUNTS.findall(line)
        if found and line.startswith("="):
            return {word: int(number) for number, word in found}
    return {}


def summary(timing: dict[str, int], rest: dict[str, int], seconds: float) -> str:
    """The last line: both parts' counts added up, and the wall-clock of the whole.

    Example::

        >>> summary({"passed": 10, "skipped": 1}, {"passed": 5, "failed": 1}, 125.0)
        'make test: 1 failed, 15 passed, 1 skipped in 2 min 5 s (both parts)'
    """
    total = {word: timing.get(word, 0) + rest.get(word, 0) for word in {*timing, *rest}}
    order = ["failed", "error", "errors", "passed", "skipped", "xfailed", "xpassed",
             "deselected"]
    words = ", ".join(f"{total[w]} {w}" for w in order if total.get(w))
    minutes, secs = divmod(round(seconds), 60)
    return f"make test: {words or 'no tests ran'} in {minutes} min {secs} s (both parts)"


def exit_status(timing: int, rest: int) -> int:
    """0 when both parts passed, else the first part's failing status.

    Example::

        >>> exit_status(0, 0), exit_status(1, 0), exit_status(0, 2), exit_status(2, 1)
        (0, 1, 2, 2)
    """
    return timing or rest


def lower_priority(pid: int, steps: int) -> None:
    """Make process ``pid`` (the leader of a new session) and its session's autogroup ``steps``
    nicer than this process, as ``nice -n STEPS`` would (19 at most); an autogroup the kernel
    does not have is skipped."""
    nice = min(os.getpriority(os.PRIO_PROCESS, 0) + steps, 19)
    os.setpriority(os.PRIO_PROCESS, pid, nice)
    with contextlib.suppress(OSError):  # no autogroups: the process nice is enough there
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))


def main(argv: Sequence[str] | None = None, root: Path = ROOT) -> int:
    """Run both parts in ``root``; print the timing part as it goes, then the rest, then
    :func:`summary`; return :func:`exit_status` (130 after Ctrl-C, 143 after SIGTERM)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if sys.stdout.isatty():  # the parts write to pipes and files: keep pytest's colours
        args = ["--color=yes", *args]
    timing_cmd, rest_cmd = commands(args)
    start = time.monotonic()
    stopped: int | None = None
    with tempfile.TemporaryFile("w+b") as log:
        rest = subprocess.Popen(rest_cmd, cwd=root, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        lower_priority(rest.pid, REST_NICE)
        timing = subprocess.Popen(timing_cmd, cwd=root, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT)
        signal.signal(signal.SIGTERM, _on_sigterm)
        shown = bytearray()
        try:
            assert timing.stdout is not None
            while chunk := timing.stdout.read1(65536):  # pytest's dots as they come
                sys.stdout.buffer.write(chunk)
                sys.stdout.buffer.flush()
                shown += chunk
            timing.wait()
            rest.wait()
        except (KeyboardInterrupt, _Terminated) as stop:
            # Both stop as after Ctrl-C, so that pytest tears its fixtures down (the throwaway
            # PostgreSQL servers, the SLURM cluster). The terminal's Ctrl-C reached the timing
            # part already (it is in this process group), not the rest (a session of its own).
            ctrl_c = isinstance(stop, KeyboardInterrupt)
            _interrupt(rest) if ctrl_c else _interrupt(timing, rest)
            _wait_or_kill(timing, rest)
            stopped = 130 if ctrl_c else 143
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if stopped is not None and timing.stdout is not None:  # its last lines, once it ended
            tail = timing.stdout.read()
            sys.stdout.buffer.write(tail)
            sys.stdout.buffer.flush()
            shown += tail
        log.seek(0)
        rest_output = log.read().decode(errors="replace")
    print(f"\n{'=' * 24} the rest of the suite, run beside the above {REST_NICE} nicer "
          f"{'=' * 24}", flush=True)
    print(rest_output, end="", flush=True)
    timing_counts = counts(shown.decode(errors="replace"))
    print(summary(timing_counts, counts(rest_output), time.monotonic() - start), flush=True)
    return stopped or exit_status(timing.returncode, rest.returncode)


class _Terminated(Exception):
    """SIGTERM reached the runner (a CI time-out)."""


def _on_sigterm(*_: object) -> None:
    raise _Terminated


def _interrupt(*processes: subprocess.Popen) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)


def _wait_or_kill(*processes: subprocess.Popen, grace: float = 120, every: float = 15) -> None:
    """Wait for interrupted pytest runs to tear their fixtures down, with Ctrl-C again every
    ``every`` s (a test that runs a launcher in its own process takes the first as the
    launcher's Ctrl-C); kill what is left after ``grace`` s."""
    deadline = time.monotonic() + grace
    for process in processes:
        while process.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                process.kill()
                process.wait()
                break
            try:
                process.wait(timeout=min(every, left))
            except subprocess.TimeoutExpired:
                _interrupt(process)


if __name__ == "__main__":
    sys.exit(main())
