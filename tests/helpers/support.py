"""Helpers the tests share: a small config, running the launcher CLI, reading the study, a free
TCP port, and a DDP-clean environment for subprocesses that start ranks of their own."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import optuna
import yaml
from optuna.trial import TrialState

from lightning_hpo.launch.processes.spawn import share_priority
from lightning_hpo.schema import is_paused
from lightning_hpo.storage import open_storage

#: ``tests/``: on ``sys.path`` (the root conftest.py) and on the launchers' ``PYTHONPATH``
#: (:func:`env`), so that ``helpers.launch_models:Class`` imports there.
TESTS = Path(__file__).resolve().parent.parent
HELPERS = TESTS / "helpers"  # this folder: the scripts the tests run by path
REPO = TESTS.parent  # the checkout
FINISHED = {TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL}
INITIAL = {"lr": 0.1, "batch_size": 64}
SECRET = "s3cr3t-pw"  # a storage password: no output may show it


def config_file(tmp_path: Path, **fields: object) -> Path:
    """A small study (LeNet on digits, a few batches per epoch) with storage and runs in
    ``tmp_path``; ``fields`` replace top-level entries."""
    raw: dict[str, object] = {
        "study": "t",
        "storage": str(tmp_path / "t.journal"),
        "run_dir": str(tmp_path / "runs"),
        "model": {"name": "lenet"},
        "space": {"lr": {"loguniform": [0.01, 1.0]}, "batch_size": {"randint": [32, 128]}},
        "initial": [dict(INITIAL)],
        "sampler": {"name": "random", "seed": 0},
        "pruner": "none",
        "trainer": {"max_epochs": 2, "limit_train_batches": 4, "limit_val_batches": 2},
        "devices": {"accelerator": "cpu"},
        "stop": {"n_trials": 6},
    }
    raw.update(fields)
    trainer = raw["trainer"]
    if isinstance(trainer, dict) and raw["pruner"] != "none":
        trainer.pop("max_epochs", None)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def env() -> dict[str, str]:
    """The environment for launcher subprocesses: tests/ importable (``helpers.launch_models``)."""
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), out.get("PYTHONPATH")]))
    return out


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS picks it; nothing holds it for the caller)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: What makes a process take itself for one rank of a DDP job that already runs, or points it at
#: that job's rendezvous: torchrun's and ``torch.distributed``'s variables (``RANK``,
#: ``LOCAL_RANK``, ``GROUP_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ...), Lightning's
#: ``NODE_RANK``, ``GLOBAL_RANK`` (another name of the global rank), and the trial a DDP follower
#: of ours waits for (``lightning_hpo.distributed._channel.TRIAL_ENV``).
DDP_VARIABLES = frozenset({
    "RANK", "GLOBAL_RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "ROLE_RANK",
    "WORLD_SIZE", "LOCAL_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "LIGHTNING_HPO_DDP_TRIAL",
})
#: Prefixes of the same: ``TORCHELASTIC_RUN_ID`` makes Lightning take the process for one
#: torchrun started; Lightning reads ``PL_*`` (``PL_GLOBAL_SEED``, left behind in this process by
#: ``seed_everything``; ``PL_TRAINER_*``, defaults of every Trainer) and ``LT_*`` (the Fabric
#: CLI's accelerator, devices, strategy).
DDP_PREFIXES = ("TORCHELASTIC_", "PL_", "LT_")


def ddp_clean_env(**extra: str) -> dict[str, str]:
    """The environment for a subprocess that starts DDP ranks of its own: this process's without
    :data:`DDP_VARIABLES` and :data:`DDP_PREFIXES`, the repository first on ``PYTHONPATH`` (this
    working tree's package), then ``extra`` (say ``MASTER_PORT=str(free_port())``)."""
    out = {key: value for key, value in os.environ.items()
           if key not in DDP_VARIABLES and not key.startswith(DDP_PREFIXES)}
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS.parent), out.get("PYTHONPATH")]))
    return {**out, **extra}


def launch(*args: str, cwd: Path, timeout: float = 420) -> subprocess.CompletedProcess[str]:
    """Run ``python -m lightning_hpo.launch ARGS`` to its end (see :func:`finish`)."""
    process = popen(*args, cwd=cwd, capture_stderr=True)
    out, err = _wait(process, timeout)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def children_by_parent() -> dict[int, list[int]]:
    """Every process's children, by parent pid (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    return children


def gone(pid: int) -> bool:
    """Whether process ``pid`` has exited (a zombie not yet reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process below it (workers run in sessions of their own, so
    killing the launcher's session would leave them, and DDP ranks waiting in a collective)."""
    children = children_by_parent()
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    for target in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(target, signal.SIGKILL)


_AS_USER = ("import os, sys; uid, gid = int(sys.argv[1]), int(sys.argv[2]); os.setgroups([]); "
            "os.setgid(gid); os.setuid(uid); os.execv(sys.argv[3], sys.argv[3:])")


def as_user(cmd: list[str], uid: int, gid: int) -> list[str]:
    """``cmd`` run as user ``uid`` (group ``gid``, no other groups) by a small program that
    drops root's rights and then becomes ``cmd`` (``exec``): ``subprocess``'s own arguments
    for it (user, group, extra_groups) make it fork the test process, as a ``preexec_fn`` does
    (:func:`ctrl_c_reaches_children` says why that is not done)."""
    return [sys.executable, "-I", "-S", "-c", _AS_USER, str(uid), str(gid), *cmd]


def ctrl_c_reaches_children() -> None:
    """Make SIGINT caught in this process, so that every program it starts takes Ctrl-C as at a
    terminal (a caught signal is reset to its default by ``exec``; an ignored one stays ignored).

    A command started with & by a shell without job control (a script, ``make test &``) ignores
    SIGINT and passes that on: the launcher would then ignore the tests' Ctrl-C. This is done
    here, in the tests' own process, and not in a ``preexec_fn``: a ``preexec_fn`` makes
    ``subprocess`` fork the whole test process instead of ``vfork``, and a fork of a process
    where an earlier test ran gRPC (the proxy's tests) runs gRPC's fork handlers in the child,
    whose poller thread then aborts the child (SIGABRT, "epoll_wait error: Bad file descriptor")
    once ``close_fds`` has closed its descriptor, before the launcher ever runs: 102 children of
    2,000 died so, none without the ``preexec_fn``.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def popen(*args: str, cwd: Path, capture_stderr: bool = False) -> subprocess.Popen[str]:
    """Start ``python -m lightning_hpo.launch ARGS`` in its own session (stderr merged into
    stdout unless ``capture_stderr``), taking SIGINT as a terminal's Ctrl-C, however the tests
    were started."""
    ctrl_c_reaches_children()
    return our_priority(subprocess.Popen(
        [sys.executable, "-m", "lightning_hpo.launch", *args], cwd=cwd, env=env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE if capture_stderr else subprocess.STDOUT,
        text=True, start_new_session=True,
    ))


def our_priority(process: subprocess.Popen[str]) -> subprocess.Popen[str]:
    """``process``, started in a session of its own, scheduled at the tests' nice, as the
    launcher does with its workers (:func:`~lightning_hpo.launch.processes.spawn.share_priority`):
    ``make test`` runs the tests that do not depend on timing at nice 10 beside those that do
    (``scripts/run_tests.py``), and the launchers they start must stay at 10 too."""
    share_priority(process.pid)
    return process


def finish(process: subprocess.Popen[str], timeout: float = 420) -> str:
    """Wait for a launcher started by :func:`popen`; on time-out kill it, its workers and
    their DDP ranks, and fail with its output."""
    return _wait(process, timeout)[0]


def _wait(process: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(process.pid)
        out, err = process.communicate()
        raise AssertionError(
            f"launcher did not finish:\n{out[-3000:]}\n{(err or '')[-3000:]}") from None
    return out, err or ""


def run_job(
    cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` in its own session until it and every process it started are done.

    Processes it started (DDP ranks) share its output pipes, so this returns only when they are
    gone too. On ``timeout`` the whole session is killed and the test fails with stderr's tail.
    """
    import pytest

    proc = our_priority(subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True,
                                         start_new_session=True))
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"{Path(cmd[1]).name} did not finish within {timeout} s:\n{stderr[-4000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def study_of(storage: str, name: str = "t") -> optuna.Study:
    """Load a study the launcher wrote."""
    return optuna.load_study(study_name=name, storage=open_storage(storage, create=False))


def states(study: optuna.Study) -> Counter[str]:
    """Trial counts by state name."""
    return Counter(t.state.name for t in study.get_trials(deepcopy=False))


def wait_for(check: Callable[[], object], timeout: float = 240, what: str = "") -> object:
    """Poll ``check`` until it returns something truthy (storage not there yet counts as no)."""
    limit = time.time() + timeout
    while time.time() < limit:
        try:
            found = check()
        except (KeyError, ValueError, OSError, optuna.exceptions.OptunaError):
            found = None
        if found:
            return found
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def wait_for_epochs(storage: str, epochs: int = 2, timeout: float = 180) -> None:
    """Wait until a trial of study ``t`` in ``storage`` that is still training has reported
    ``epochs`` epochs (it is running past its first checkpoints: the moment to interrupt it;
    one that ended meanwhile does not count)."""
    wait_for(lambda: any(t.state == TrialState.RUNNING and not is_paused(t)
                         and len(t.intermediate_values) >= epochs
                         for t in study_of(storage).get_trials(deepcopy=False)),
             timeout=timeout, what=f"a running trial with {epochs} epochs")


def _journal_with_garbage_inside(folder: Path) -> str:
    """``folder/t.journal``: a study's journal with a line that is not a record in the middle."""
    path = folder / "t.journal"
    optuna.create_study(study_name="t", storage=open_storage(str(path)))
    first = path.read_bytes()
    path.write_bytes(first + b"garbage\n" + first)  # Optuna's replay fails on the middle line
    return str(path)
