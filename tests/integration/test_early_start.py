"""The launcher's start: workers start before the study exists and import torch, and the first
one done checks the config (``Supervisor.start_held``, the ``go`` line on the control pipe); the
launcher itself never imports torch; and a worker says each repeated notice once
(:mod:`lightning_hpo.launch.worker._once`). The early start from the config file is
``test_early.py``."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from io import StringIO
from pathlib import Path

import pytest
import yaml
from helpers.support import config_file, launch, popen, wait_for

from lightning_hpo.launch.processes.protocol import GO_LINE, StopOrder, read_go, read_stop_orders
from lightning_hpo.launch.worker._once import SaidOnce, _OnceFilter, message_key, say_once

# -- the go line on the control pipe ----------------------------------------------------------


def _pipe(*chunks: bytes, close: bool = True) -> int:
    read, write = os.pipe()
    for chunk in chunks:
        os.write(write, chunk)
    if close:
        os.close(write)
    os.set_blocking(read, False)
    return read


def test_go_is_read_and_the_stop_orders_after_it_stay_in_the_pipe() -> None:
    order = StopOrder("wall-clock budget reached", now=False)
    fd = _pipe(GO_LINE + order.to_line().encode())
    assert read_go(fd, lambda: True) is True
    assert read_stop_orders(fd) == [order]
    os.close(fd)


def test_an_interrupt_order_says_why_and_a_budget_order_reads_as_before() -> None:
    """The launcher's interrupt order (written before its SIGTERM) round-trips; a budget
    order's line is unchanged, so an older worker reads it."""
    order = StopOrder("launcher stopped by SIGINT", now=True, interrupt=True)
    assert StopOrder.from_line(order.to_line()) == order
    budget = StopOrder("wall-clock budget reached", now=False)
    assert json.loads(budget.to_line()) == {"stop": "wall-clock budget reached", "now": False}
    assert not StopOrder.from_line(budget.to_line()).interrupt


def test_the_rest_of_a_line_read_go_had_begun_is_skipped() -> None:
    """A signal's handler reading the orders while read_go is inside a line: the line's rest is
    no order, and the whole orders after it are read."""
    order = StopOrder("launcher stopped by SIGTERM", now=True, interrupt=True)
    fd = _pipe(order.to_line().encode(), order.to_line().encode())
    os.read(fd, 5)  # read_go's first bytes
    assert read_stop_orders(fd) == [order]
    os.close(fd)


def test_go_ignores_other_lines_before_it() -> None:
    fd = _pipe(b'{"something": 1}\n', GO_LINE)
    assert read_go(fd, lambda: True) is True
    os.close(fd)


def test_no_go_when_the_launcher_closes_the_pipe_or_a_signal_came() -> None:
    fd = _pipe(b'{"go": tr')  # the launcher died mid-line
    assert read_go(fd, lambda: True) is False
    os.close(fd)
    read, write = os.pipe()
    assert read_go(read, lambda: False) is False  # a signal: Stop.reason set
    os.close(read)
    os.close(write)


def test_without_waiting_the_go_line_is_seen_only_when_it_is_there() -> None:
    """A worker done importing looks once: the go line there means another worker answered
    the check and the study exists (it skips its own check); the orders after it stay."""
    read, write = os.pipe()
    os.set_blocking(read, False)
    assert read_go(read, lambda: True, wait=False) is False  # nothing yet: it checks
    os.write(write, b'{"something": 1}\n')
    assert read_go(read, lambda: True, wait=False) is False  # not the go line
    order = StopOrder("wall-clock budget reached", now=True)
    os.write(write, GO_LINE + order.to_line().encode())
    assert read_go(read, lambda: True, wait=False) is True
    assert read_stop_orders(read) == [order]
    os.close(write)
    assert read_go(read, lambda: True, wait=False) is False  # closed: no go
    os.close(read)


def test_a_go_line_is_not_a_stop_order() -> None:
    fd = _pipe(GO_LINE)
    assert read_stop_orders(fd) == []
    os.close(fd)


# -- said once -----------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b", "same"), [
    ("The number of training batches (9) is smaller than the logging interval 50",
     "The number of training batches (40) is smaller than the logging interval 50", True),
    ("Checkpoint directory /tmp/x/trial_00001 exists", "Checkpoint directory /r/trial_2 exists",
     True),
    ("lr 1e-3 too small", "lr 2.5e-4 too small", True),
    ("GPU available: False, used: False", "GPU available: True, used: True", False),
    ("C:\\runs\\trial_1 missing", "C:\\runs\\trial_22 missing", True),
])
def test_messages_that_differ_in_numbers_and_paths_are_the_same(
    a: str, b: str, same: bool
) -> None:
    assert (message_key(a) == message_key(b)) is same


def test_said_once_keeps_every_distinct_message() -> None:
    said = SaidOnce()
    texts = ["a 1", "a 2", "b", "b", "c /x/y", "c /z"]
    assert [said.first(t) for t in texts] == [True, False, True, False, True, False]


def test_say_once_holds_back_repeated_warnings_and_library_records_not_launcher_events(
) -> None:
    stream = StringIO()
    handler = logging.StreamHandler(stream)
    library = logging.getLogger("test_early_start.library")
    events = logging.getLogger("lightning_hpo.launch.test_events")
    for logger in (library, events):
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    shown: list[str] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = lambda m, *a, **k: shown.append(str(m))
            say_once()
            for batches in (9, 40, 12):
                warnings.warn(f"The number of training batches ({batches}) is small",
                              UserWarning, stacklevel=1)
                library.info("GPU available: False, used: False")
                events.warning("trial %d was handed to another worker", batches)
            warnings.warn("Checkpoint directory /r/t exists and is not empty", UserWarning,
                          stacklevel=1)
            warnings.warn("another warning", UserWarning, stacklevel=1)
    finally:
        for logger in (library, events):
            logger.removeHandler(handler)
        _remove_once_filters()  # say_once() is for a worker's whole life, not this process's
    assert shown == ["The number of training batches (9) is small", "another warning"]
    lines = stream.getvalue().splitlines()
    assert lines.count("GPU available: False, used: False") == 1
    assert [line for line in lines if "handed" in line] == [
        f"trial {n} was handed to another worker" for n in (9, 40, 12)]


def _remove_once_filters() -> None:
    loggers = [logging.getLogger()] + [
        logger for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)]
    for logger in loggers:
        for handler in logger.handlers:
            for once in [f for f in handler.filters if isinstance(f, _OnceFilter)]:
                handler.removeFilter(once)


# -- the launcher's start, for real -------------------------------------------------------------

_STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ")


@pytest.mark.slow
def test_workers_say_each_notice_once_over_many_trials(tmp_path: Path) -> None:
    """ASHA over 8 trials on 2 slots, resume checkpoints at every epoch: no line of a slot's
    log is a repeat (numbers and paths aside), and no weights_only notice at all."""
    config = config_file(
        tmp_path, pruner={"name": "asha", "min_resource": 1, "max_resource": 3,
                          "reduction_factor": 3},
        checkpoint={"every": "epoch"}, stop={"n_trials": 8},
        devices={"accelerator": "cpu", "count": 2},
    )
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    logs = sorted((tmp_path / "runs" / "t" / "workers").glob("slot*.log"))
    assert len(logs) == 2
    for log in logs:
        lines = [_STAMP.sub("", line) for line in log.read_text().splitlines() if line.strip()]
        keys = [message_key(line) for line in lines]
        assert len(keys) == len(set(keys)), lines
        assert not any("weights_only" in line for line in lines), lines
        assert not any("exists and is not empty" in line for line in lines), lines


#: Put in each worker of a run by a ``sitecustomize`` module: at its exit, how many objects its
#: garbage collector holds frozen and whether the collector is on.
_COLLECTOR_PROBE = """\
import atexit, gc, os, sys
def _probe():  # sys.argv is set after this module runs
    if sys.argv[0].endswith(os.path.join("launch", "worker", "__main__.py")):
        with open(os.path.join(os.environ["COLLECTOR_PROBE"], str(os.getpid())), "w") as out:
            out.write(f"{gc.get_freeze_count()} {gc.isenabled()}")
atexit.register(_probe)
"""


@pytest.mark.slow
def test_the_launcher_process_never_imports_torch(tmp_path: Path) -> None:
    """A whole run from Python: the launcher's process parses, schedules and reports without
    torch or Lightning; the workers import them, in parallel, with the garbage collector
    paused (launch/worker/_collector.py): each ends with the objects of its imports frozen (several
    hundred thousand) and its collector on."""
    config = config_file(tmp_path, stop={"n_trials": 2}, devices={"accelerator": "cpu", "count": 2})
    probe = tmp_path / "probe"
    (probe / "site").mkdir(parents=True)
    (probe / "site" / "sitecustomize.py").write_text(_COLLECTOR_PROBE)
    script = (
        "import sys, lightning_hpo.launch as l\n"
        f"study = l.run({str(config)!r})\n"
        "assert len(study.trials) == 2\n"
        "print(sorted(m for m in ('torch', 'lightning', 'sqlalchemy') if m in sys.modules))\n"
    )
    path = os.pathsep.join(filter(None, [str(probe / "site"), os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": path, "COLLECTOR_PROBE": str(probe)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
    workers = [p.read_text().split() for p in probe.iterdir() if p.name != "site"]
    assert len(workers) == 2, workers
    assert all(int(frozen) > 100_000 and on == "True" for frozen, on in workers), workers


@pytest.mark.slow
def test_a_worker_dying_while_it_checks_is_one_line_exit_1_and_no_study(
    tmp_path: Path
) -> None:
    """The project's module ends the checking worker's process at import: the launcher says
    so in one line with the worker's log, exits 1, and no study was created."""
    (tmp_path / "dying.py").write_text("import os\nos._exit(3)\n")
    config = tmp_path / "tune.yaml"
    config.write_text(yaml.safe_dump({
        "study": "t", "storage": str(tmp_path / "t.journal"), "run_dir": str(tmp_path / "runs"),
        "cli": "dying:main", "metric": "val_loss",
        "space": {"model.init_args.lr": {"loguniform": [0.01, 1.0]}},
        "pruner": "none", "trainer": {"max_epochs": 1},
        "stop": {"n_trials": 2}, "devices": {"accelerator": "cpu", "count": 1},
    }))
    result = launch(str(config), cwd=tmp_path, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, lines
    log = tmp_path / "runs" / "t" / "workers" / "slot0.log"
    assert lines[0].startswith("error: the worker checking the config (pid ")
    assert f"exited with code 3 before it answered; its log: {log}" in lines[0]
    assert log.is_file()  # kept: the user reads why
    assert not (tmp_path / "t.journal").exists()


@pytest.mark.slow
def test_a_refused_config_stops_every_early_worker(tmp_path: Path) -> None:
    """The checking worker refuses a range end; the other slot's worker, waiting for the
    word, is stopped too: no process of the run is left and nothing is written."""
    config = config_file(tmp_path, devices={"accelerator": "cpu", "count": 2})
    result = launch(str(config), "--set", "space.momentum={uniform: [0.0, 1.5]}", cwd=tmp_path,
                    timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: space.momentum: the high end 1.5 is refused: is 1.5, but must be a number in "
        "[0, 1)"]
    assert not (tmp_path / "t.journal").exists() and not (tmp_path / "runs").exists()
    workers = subprocess.run(["pgrep", "-f", "lightning_hpo.launch.worker"],
                             capture_output=True, text=True).stdout.split()
    assert not [pid for pid in workers if _ours(int(pid), tmp_path)]


def _ours(pid: int, folder: Path) -> bool:
    """Whether process ``pid`` is a worker started in ``folder`` (its working directory)."""
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd")) == folder
    except OSError:
        return False


@pytest.mark.slow
def test_ctrl_c_while_the_workers_import_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    """SIGINT as soon as the workers exist (they import torch for seconds): one line, exit
    130, every worker stopped, the folders it made removed and no study."""
    config = config_file(tmp_path, devices={"accelerator": "cpu", "count": 2})
    process = popen(str(config), "--quiet", cwd=tmp_path, capture_stderr=True)
    log = tmp_path / "runs" / "t" / "workers" / "slot1.log"
    wait_for(log.exists, timeout=60, what="the second worker's log")
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert err.strip().splitlines() == ["stopped by SIGINT while starting; no trial had started"]
    assert not (tmp_path / "runs").exists() and not (tmp_path / "t.journal").exists()
    time.sleep(1)  # the workers' kill is done by then; a held one sees its pipe close
    workers = subprocess.run(["pgrep", "-f", "lightning_hpo.launch.worker"],
                             capture_output=True, text=True).stdout.split()
    assert not [pid for pid in workers if _ours(int(pid), tmp_path)]
