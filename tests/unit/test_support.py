"""The test harness itself: programs the tests start take Ctrl-C however the tests were
started, and no test forks the test process (see ``helpers.support.ctrl_c_reaches_children``)."""

from __future__ import annotations

import doctest
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from helpers.support import TESTS

_CHILD = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"


@pytest.mark.parametrize("reach", [True, False], ids=["made-to-reach", "left-ignored"])
def test_children_take_ctrl_c_when_the_tests_were_started_ignoring_it(reach: bool) -> None:
    """A test process that ignores SIGINT (started with & by a script) starts programs that
    take it once ``ctrl_c_reaches_children`` ran; without it they ignore it too."""
    parent = (
        "import signal, subprocess, sys; sys.path.insert(0, sys.argv[1]); "
        "signal.signal(signal.SIGINT, signal.SIG_IGN); "
        "from helpers.support import ctrl_c_reaches_children; "
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
    here): subprocesses are started without them (``helpers.support.as_user`` drops root's
    rights)."""
    pattern = re.compile(r"preexec_fn\s*=|os\.fork\(|get_context\(\s*[\"']fork|"
                         r"\bextra_groups\W{0,2}\s*[=:]|\buser\s*=\s*\w+\.pw_uid|\bgroup\s*=\s*\w+\.pw_gid")
    found = [
        f"{path.relative_to(TESTS)}:{number}"
        for path in sorted(TESTS.rglob("*.py")) if path != Path(__file__).resolve()
        for number, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)
    ]
    assert found == []


# -- scripts/run_tests.py: make test's two parts ----------------------------------------------

_RUNNER = TESTS.parent / "scripts" / "run_tests.py"


def _runner() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("run_tests", _RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _project(tmp_path: Path, timing: str, other: str) -> list[str]:
    """A project in ``tmp_path`` whose timing files are empty but ``test_launch.py``
    (``timing``), with one other test file (``other``); the command that runs the runner there."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "lightning_hpo").mkdir()
    for name in _runner().FOREGROUND_FILES:
        (tmp_path / "tests" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "tests" / name).write_text("")
    (tmp_path / "tests" / "integration" / "test_launch.py").write_text(timing)
    (tmp_path / "tests" / "test_other.py").write_text(other)
    script = (f"import sys; sys.path.insert(0, {str(_RUNNER.parent)!r}); import run_tests; "
              f"sys.exit(run_tests.main(['-s', '-p', 'no:cacheprovider'], root=__import__("
              f"'pathlib').Path({str(tmp_path)!r})))")
    return [sys.executable, "-c", script]


def test_the_runners_examples_and_its_timing_files_exist() -> None:
    runner = _runner()
    assert doctest.testmod(runner).failed == 0
    missing = [name for name in runner.FOREGROUND_FILES if not (TESTS / name).is_file()]
    assert missing == [] and len(set(runner.FOREGROUND_FILES)) == len(runner.FOREGROUND_FILES)


def _collected(command: list[str]) -> list[str]:
    """The test ids ``command`` (a pytest run with ``--collect-only -q``) collects here."""
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS.parent),
                                                       os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(command, cwd=TESTS.parent, capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


@pytest.mark.slow
def test_the_runners_two_parts_run_every_test_of_the_suite_once() -> None:
    """The timing part and the rest (``--ignore`` of each foreground file) together collect
    what ``python -m pytest`` collects (tests and docstring examples), and no test twice."""
    args = ["--collect-only", "-q", "-p", "no:cacheprovider"]
    timing, rest = (_collected(command) for command in _runner().commands(args))
    whole = _collected([sys.executable, "-m", "pytest", *args])
    assert timing and rest and len(whole) == len(set(whole))
    assert len(timing) == len(set(timing)) and len(rest) == len(set(rest))
    assert set(timing).isdisjoint(rest)
    assert sorted(timing + rest) == sorted(whole)


@pytest.mark.parametrize(("rest_passes", "status"), [(True, 0), (False, 1)],
                         ids=["both-pass", "the-rest-fails"])
def test_the_runner_runs_both_parts_and_fails_when_either_does(
    tmp_path: Path, rest_passes: bool, status: int
) -> None:
    """A project with the timing files and one other: both parts run, the rest at nice 10 in
    its own session, its output after the timing part's, and the counts added up. (A timing
    file that is not there fails the run: pytest's "file or directory not found".)"""
    probe = ("import os\n\ndef test_where():\n"
             "    print(os.getpriority(os.PRIO_PROCESS, 0), os.getsid(0) == os.getpid())\n")
    command = _project(tmp_path, probe + "\ndef test_two():\n    pass\n",
                       probe + f"\ndef test_outcome():\n    assert {rest_passes}\n")
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    out = done.stdout
    assert done.returncode == status, out + done.stderr
    timing_at, rest_at = out.index("test_launch.py"), out.index("the rest of the suite")
    assert timing_at < rest_at < out.index("test_other.py")
    nice = os.getpriority(os.PRIO_PROCESS, 0)  # 10 where this test runs in make test's rest
    assert f"{nice} False" in out[:rest_at]  # the timing part: our priority, our session
    rest_nice = min(nice + _runner().REST_NICE, 19)
    assert f"{rest_nice} True" in out[rest_at:]  # the rest: 10 nicer, a session of its own
    words = "4 passed" if rest_passes else "1 failed, 3 passed"
    assert out.rstrip().splitlines()[-1].startswith(f"make test: {words} in ")


@pytest.mark.parametrize(("how", "status"), [("SIGTERM", 143), ("SIGINT", 130)])
def test_the_runner_stops_both_parts_on_sigterm_or_ctrl_c(
    tmp_path: Path, how: str, status: int
) -> None:
    """A CI time-out (SIGTERM to the runner) or a terminal's Ctrl-C (SIGINT to its process
    group) stops both parts as Ctrl-C does, so that their fixtures are torn down; the runner
    then says what each part had done and exits 143 or 130."""
    slow = ("import pathlib, time\n\nimport pytest\n\n\n@pytest.fixture\ndef torn():\n"
            "    pathlib.Path(__file__).with_suffix('.started').touch()\n"
            "    yield\n    print('torn down')\n\n\ndef test_slow(torn):\n    time.sleep(60)\n")
    command = _project(tmp_path, slow, slow)
    runner = subprocess.Popen(command, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while len(list((tmp_path / "tests").rglob("*.started"))) < 2:  # both parts in test_slow
        assert time.monotonic() < deadline and runner.poll() is None
        time.sleep(0.1)
    if how == "SIGTERM":
        runner.send_signal(signal.SIGTERM)
    else:  # what a terminal does: the whole foreground process group
        os.killpg(runner.pid, signal.SIGINT)
    out, _ = runner.communicate(timeout=60)
    assert runner.returncode == status, out
    rest_at = out.index("the rest of the suite")
    assert "KeyboardInterrupt" in out[:rest_at] and "KeyboardInterrupt" in out[rest_at:], out
    assert out.count("torn down") == 2, out
    assert out.rstrip().splitlines()[-1].startswith("make test: no tests ran in "), out
