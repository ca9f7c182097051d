"""The launcher's early start (``launch.processes.early``): the plan read from a config
file without torch or Optuna, held workers started and stopped, the supervisor taking them over
only when they fit, and the command line starting them before anything heavy is imported."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.support import config_file, launch, popen, study_of, wait_for

from lightning_hpo.launch.config import devices as devices_module
from lightning_hpo.launch.config import parse_config
from lightning_hpo.launch.config.devices import Slot
from lightning_hpo.launch.processes import early as early_module
from lightning_hpo.launch.processes.early import EarlyPlan, EarlyWorkers, plan_early, start_early
from lightning_hpo.launch.processes.supervisor import Supervisor

CORES = len(os.sched_getaffinity(0))


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine where no GPU can be (the plan is known without torch)."""
    monkeypatch.setattr(devices_module, "cuda_possible", lambda: False)


def _raw(**fields: Any) -> dict[str, Any]:
    return {"study": "s", "model": {"name": "lenet"}, "space": {"lr": {"loguniform": [0.01, 1.0]}},
            "pruner": "none", "trainer": {"max_epochs": 1}, "stop": {"n_trials": 2}, **fields}


# -- the plan, from the file's mapping alone ---------------------------------------------------


@pytest.mark.usefixtures("no_gpu")
@pytest.mark.parametrize(
    ("devices", "slots"),
    [
        pytest.param({"accelerator": "cpu", "count": 1}, [(0,)], id="one-core"),
        pytest.param({"count": 2, "per_trial": 2}, [(0, 1)], id="ddp-slot"),
        pytest.param({"count": 1, "trials_per_device": 2}, [(0,), (0,)], id="shared-core"),
    ],
)
def test_the_plan_is_the_slots_the_launcher_would_plan(
    devices: dict[str, Any], slots: list[tuple[int, ...]]
) -> None:
    if CORES < 2 and devices.get("count", 1) > CORES:
        pytest.skip("needs 2 cores")
    plan = plan_early(_raw(devices=devices), started=100.0)
    assert plan is not None
    assert [s.devices for s in plan.slots] == slots
    assert plan.kind == "cpu" and plan.threads == max(1, CORES // (len(slots) * len(slots[0])))
    assert plan.study_dir == Path("runs") / "s" and plan.deadline is None


@pytest.mark.usefixtures("no_gpu")
@pytest.mark.parametrize(
    ("fields", "study_dir", "deadline"),
    [
        pytest.param({}, "runs/s", None, id="defaults"),
        pytest.param({"run_dir": "/tmp/r", "stop": {"max_wallclock_time": 60}},
                     "/tmp/r/s", 160.0, id="run-dir-and-budget"),
        pytest.param({"run_dir": None, "stop": {"max_wallclock_time": 2.5}}, "runs/s",
                     102.5, id="null-run-dir-is-the-default"),
    ],
)
def test_the_plan_places_the_logs_and_the_deadline_as_the_config_does(
    fields: dict[str, Any], study_dir: str, deadline: float | None
) -> None:
    raw = _raw(devices={"accelerator": "cpu", "count": 1}, **fields)
    plan = plan_early(raw, started=100.0)
    assert plan is not None
    assert (str(plan.study_dir), plan.deadline) == (study_dir, deadline)
    cfg = parse_config(raw)  # what the launcher itself makes of the same mapping
    assert plan.study_dir == cfg.study_dir


@pytest.mark.usefixtures("no_gpu")
@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"study": "../x"}, id="study-not-a-name"),
        pytest.param({"study": None}, id="no-study"),
        pytest.param({"run_dir": ""}, id="empty-run-dir"),
        pytest.param({"run_dir": 3}, id="run-dir-not-a-path"),
        pytest.param({"devices": {"per_trial": 0}}, id="bad-devices"),
        pytest.param({"devices": {"count": 10_000}}, id="more-cores-than-exist"),
        pytest.param({"devices": "cpu"}, id="devices-not-a-mapping"),
        pytest.param({"devices": {"accelerator": "gpu"}}, id="gpu-asked"),
        pytest.param({"stop": {"max_wallclock_time": "10m"}}, id="budget-not-seconds"),
        pytest.param({"stop": {"max_wallclock_time": True}}, id="budget-a-bool"),
        pytest.param({"stop": {"max_wallclock_time": float("inf")}}, id="budget-infinite"),
        pytest.param({"stop": {"max_wallclock_time": 10**400}}, id="budget-beyond-floats"),
    ],
)
def test_no_plan_where_the_launcher_will_refuse_or_needs_torch(fields: dict[str, Any]) -> None:
    assert plan_early(_raw(**fields), started=0.0) is None


@pytest.mark.parametrize(
    ("devices", "gpus", "expected"),
    [
        pytest.param({"accelerator": "auto"}, None, None, id="auto-uncountable"),
        pytest.param({"accelerator": "gpu"}, None, None, id="gpu-uncountable"),
        pytest.param({"accelerator": "gpu"}, 0, None, id="gpu-asked-none-there"),
        pytest.param({"accelerator": "auto"}, 0, ("cpu", None), id="auto-no-gpu-is-cpu"),
        pytest.param({"accelerator": "cpu"}, None, ("cpu", None), id="cpu-never-counts-gpus"),
        pytest.param({"accelerator": "auto"}, 2, ("gpu", [(0,), (1,)]), id="auto-2-gpus"),
        pytest.param({"accelerator": "gpu", "per_trial": 2}, 4, ("gpu", [(0, 1), (2, 3)]),
                     id="ddp-on-4-gpus"),
        pytest.param({"count": 1, "trials_per_device": 2}, 2, ("gpu", [(0,), (0,)]),
                     id="2-trials-on-gpu-0"),
        pytest.param({"count": 3}, 2, None, id="more-gpus-asked-than-seen"),
    ],
)
def test_on_a_gpu_machine_the_plan_counts_the_gpus_without_torch(
    monkeypatch: pytest.MonkeyPatch, devices: dict[str, Any], gpus: int | None,
    expected: tuple[str, list[tuple[int, ...]] | None] | None,
) -> None:
    monkeypatch.setattr(devices_module, "cuda_possible", lambda: True)
    monkeypatch.setattr(early_module, "gpus_without_torch", lambda: gpus)
    plan = plan_early(_raw(devices=devices), started=0.0)
    if expected is None:
        assert plan is None
        return
    assert plan is not None
    kind, slots = expected
    assert plan.kind == kind
    if slots is not None:
        assert [s.devices for s in plan.slots] == slots
        assert plan.threads == max(1, CORES // (len(slots) * len(slots[0])))


# -- starting and stopping them ------------------------------------------------------------------


@pytest.mark.usefixtures("no_gpu")
def test_early_workers_start_held_and_abort_leaves_nothing(tmp_path: Path) -> None:
    raw = _raw(run_dir=str(tmp_path / "runs"), devices={"accelerator": "cpu", "count": 1},
               stop={"n_trials": 2, "max_wallclock_time": 60})
    early = start_early(raw, started=time.time())
    assert early is not None
    try:
        (worker,) = early.workers
        log = tmp_path / "runs" / "s" / "workers" / "slot0.log"
        assert log.is_file() and early.made == tmp_path / "runs"
        spec = json.loads(_environ(worker.process.pid)["LIGHTNING_HPO_WORKER"])
        assert (spec["hold"], spec["check"], spec["slot"], spec["deadline"]) == (
            True, True, 0, early.plan.deadline)
        assert json.loads(_environ(worker.process.pid)["LIGHTNING_HPO_CONFIG"]) == raw
        assert os.getsid(worker.process.pid) == worker.process.pid  # a session of its own
    finally:
        early.abort()
    assert worker.process.returncode == -signal.SIGKILL
    assert not (tmp_path / "runs").exists()
    early.abort()  # twice is fine


def _environ(pid: int, key: str = "LIGHTNING_HPO_WORKER", seconds: float = 10.0) -> dict[str, str]:
    """Process ``pid``'s environment, once it holds ``key``: ``Popen`` returns when the child's
    exec has passed its point of no return, a moment before the kernel sets up the new
    environment (``/proc/PID/environ`` reads empty meanwhile; seen once under a CI run's load)."""
    deadline = time.monotonic() + seconds
    while True:
        data = Path(f"/proc/{pid}/environ").read_bytes()
        found = dict(item.split("=", 1) for item in data.decode().split("\0") if "=" in item)
        if key in found or time.monotonic() > deadline:
            return found
        time.sleep(0.01)


@pytest.mark.usefixtures("no_gpu")
def test_no_early_start_where_the_run_folder_cannot_be_made(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    raw = _raw(run_dir=str(tmp_path / "file" / "runs"), devices={"accelerator": "cpu"})
    assert start_early(raw, started=time.time()) is None
    assert (tmp_path / "file").read_text() == "not a folder"


@pytest.mark.usefixtures("no_gpu")
def test_a_value_json_cannot_hold_means_no_early_start(tmp_path: Path) -> None:
    """YAML reads ``2024-01-01`` as a date: the config goes on to be refused by the launcher,
    not to crash the early start."""
    import datetime

    raw = _raw(run_dir=str(tmp_path / "runs"), devices={"accelerator": "cpu"},
               model={"name": "lenet", "when": datetime.date(2024, 1, 1)})
    assert start_early(raw, started=time.time()) is None
    assert not (tmp_path / "runs").exists()


def _supervisor(raw: dict[str, Any], started: float) -> Supervisor:
    cfg = parse_config(raw)
    return Supervisor(cfg, None, [Slot(0, (0,))], "cpu", n_cores=CORES, started=started)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"raw": {"study": "s", "stop": {"n_trials": 3}}}, id="another-config"),
        pytest.param({"threads": 99}, id="other-threads"),
        pytest.param({"deadline": 1.0}, id="another-deadline"),
        pytest.param({"slots": [Slot(0, (0,)), Slot(1, (0,))]}, id="other-slots"),
        pytest.param({"study_dir": Path("elsewhere")}, id="another-study-folder"),
    ],
)
def test_the_supervisor_takes_over_only_workers_that_fit_its_run(
    change: dict[str, Any]
) -> None:
    raw = _raw(devices={"accelerator": "cpu", "count": 1})
    sup = _supervisor(raw, started=50.0)
    fitting = dict(raw=parse_config(raw).raw, kind="cpu", slots=[Slot(0, (0,))],
                   threads=sup._threads, deadline=None, study_dir=Path("runs/s"))
    assert EarlyPlan(**fitting).study_dir == sup.cfg.study_dir
    stand_ins: list[Any] = [None] * len(change.get("slots", fitting["slots"]))  # one a slot:
    # the count fits, so only the changed field can make it refuse
    early = EarlyWorkers(EarlyPlan(**{**fitting, **change}), workers=stand_ins,
                         log_dir=Path("runs/s/workers"))
    assert sup.adopt(early) is False and early.taken is False


# -- the command line --------------------------------------------------------------------------


def test_the_command_line_module_imports_neither_optuna_nor_torch() -> None:
    """What ``python -m lightning_hpo.launch`` imports before it starts the workers."""
    script = ("import sys, lightning_hpo.launch.__main__\n"
              "print(sorted(m for m in ('optuna', 'torch', 'lightning', 'rich', 'sqlalchemy')"
              " if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_a_config_the_launcher_refuses_after_the_early_start_leaves_nothing(
    tmp_path: Path
) -> None:
    """The workers start from the file's devices, then the full validation refuses a field:
    one line, exit 2, no worker left, no folder, no study."""
    config = config_file(tmp_path, devices={"accelerator": "cpu", "count": 1},
                         pruner={"name": "asha", "reduction_factor": 1})
    result = launch(str(config), cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: pruner.reduction_factor: is 1, but must be an integer >= 2"]
    assert not (tmp_path / "runs").exists() and not (tmp_path / "t.journal").exists()
    assert not _our_workers(tmp_path)


@pytest.mark.slow
def test_a_storage_the_launcher_refuses_after_the_early_start_leaves_nothing(
    tmp_path: Path
) -> None:
    config = config_file(tmp_path, devices={"accelerator": "cpu", "count": 1},
                         storage="postgresql://u:secret@127.0.0.1:1/db?connect_timeout=1")
    result = launch(str(config), cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "secret" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("error: storage")
    assert not (tmp_path / "runs").exists() and not _our_workers(tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(CORES < 2, reason="needs 2 cores for 2 CPU slots")
def test_the_first_worker_done_importing_answers_when_another_dies(tmp_path: Path) -> None:
    """Slot 0's worker is killed while it imports torch: slot 1's checks the config, the study
    is created, slot 0 is restarted, and every trial completes."""
    config = config_file(tmp_path, devices={"accelerator": "cpu", "count": 2},
                         stop={"n_trials": 4})
    process = popen(str(config), "--quiet", cwd=tmp_path, capture_stderr=True)
    slot0 = wait_for(lambda: _worker_of_slot(tmp_path, 0), timeout=60, what="slot 0's worker")
    os.kill(int(slot0), signal.SIGKILL)  # type: ignore[call-overload]
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    study = study_of(str(tmp_path / "t.journal"))
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 4
    assert "restarting the slot" in err  # the death was seen, after the study existed


def _our_workers(folder: Path) -> list[int]:
    """Worker processes whose working directory is ``folder`` (this test's)."""
    time.sleep(0.5)  # a killed worker is reaped by then
    found = subprocess.run(["pgrep", "-f", "lightning_hpo.launch.worker"], capture_output=True,
                           text=True).stdout.split()
    mine = []
    for pid in map(int, found):
        try:
            if Path(os.readlink(f"/proc/{pid}/cwd")) == folder:
                mine.append(pid)
        except OSError:
            continue
    return mine


def _worker_of_slot(folder: Path, slot: int) -> int | None:
    for pid in _our_workers(folder):
        try:
            spec = json.loads(_environ(pid, seconds=1.0).get("LIGHTNING_HPO_WORKER", "{}"))
        except (OSError, ValueError):
            continue
        if spec.get("slot") == slot:
            return pid
    return None
