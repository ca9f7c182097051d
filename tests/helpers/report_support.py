"""What the report tests (``tests/unit/report/``) share: studies with exactly what the
launcher writes, simulated in-process (ASHA trials on two slots; paused trials and training
segments; segment entries left open; several objectives), the fixtures that make them, and
helpers that count what a figure drew.

A test module requests these fixtures by binding them to its own names (pytest finds fixtures
among a module's names)::

    journal = report_support.journal
    study = report_support.study  # requests ``journal``: bind both
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.image
import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState

from lightning_hpo._optuna import storage_of, study_id_of
from lightning_hpo.pruners import ASHAPruner
from lightning_hpo.pruners.rungs import rung_levels
from lightning_hpo.report import load
from lightning_hpo.schema import ATTR, CONFIG_ATTR, PRUNER_ATTR, with_objective_values
from lightning_hpo.storage import open_storage

T0 = 1_700_000_000.0  # unix seconds: when the first simulated trial starts
EPOCH_S = 1.0  # simulated seconds per epoch
SETUP_S = 0.25  # simulated seconds from a trial's start to its first epoch
GAP_S = 0.1  # simulated idle seconds between two trials on one slot
DISTRIBUTIONS = {
    "lr": FloatDistribution(0.01, 1.0, log=True),
    "activation": CategoricalDistribution(["relu", "sigmoid"]),
}


@dataclass(frozen=True)
class Spec:
    """One simulated trial: final state and the metric after each epoch."""

    state: TrialState
    curve: tuple[float, ...]
    lr: float
    activation: str = "relu"
    devices: str = "cpu:0"
    stop_reason: str | None = None  # PRUNED by the launcher: the study's budget was spent


#: ASHA with rungs 1, 3, 9 (min_resource 1, reduction_factor 3, max_resource 9).
SCENARIO = (
    Spec(TrialState.COMPLETE, (0.5, 0.3, 0.2, 0.15, 0.12, 0.1, 0.08, 0.07, 0.06), 0.1),
    Spec(TrialState.PRUNED, (0.8,), 0.9),
    Spec(TrialState.PRUNED, (0.6, 0.5, 0.45), 0.02, "sigmoid"),
    Spec(TrialState.COMPLETE, (0.4, 0.2, 0.1, 0.08, 0.06, 0.05, 0.045, 0.042, 0.04), 0.2),
    Spec(TrialState.FAIL, (0.7, 0.65), 0.5),
    Spec(TrialState.PRUNED, (0.9,), 0.03, "sigmoid"),
    Spec(TrialState.COMPLETE, (0.45, 0.3, 0.25, 0.2, 0.15, 0.12, 0.1, 0.09, 0.08), 0.3),
    Spec(TrialState.PRUNED, (0.35, 0.3, 0.28), 0.15),
)
CONFIG = {
    "study": "demo", "storage": "runs/demo.journal", "model": {"name": "lenet"},
    "metric": "validation_error", "direction": "minimize",
    "space": {"lr": {"loguniform": [0.01, 1.0]}, "activation": {"choice": ["relu", "sigmoid"]}},
    "pruner": {"name": "asha", "min_resource": 1, "max_resource": 9, "reduction_factor": 3},
    "trainer": {"max_epochs": 9},  # the launcher stores it resolved, as "metric" and "direction"
    "stop": {"n_trials": 10},
}
RUNGS = rung_levels(1, max_resource=9, reduction_factor=3)
PNGS = ("incumbent.png", "learning_curves.png", "rungs.png", "timeline.png")
BUDGET = "wall-clock budget reached (stop.max_wallclock_time=12 s); stopped after epoch 2"


def record_rungs(study: optuna.Study, pruner: optuna.pruners.BasePruner, number: int) -> None:
    """Write trial ``number``'s rung records as the pruner did, epoch by epoch.

    The real pruner decides on each prefix of the trial's reports, which writes its records
    to the storage; its answers are ignored (the scenario says how each trial ended).
    """
    frozen = study.get_trials(deepcopy=False)[number]
    for step in sorted(frozen.intermediate_values):
        prefix = copy.copy(frozen)
        prefix.intermediate_values = {
            s: v for s, v in frozen.intermediate_values.items() if s <= step}
        pruner.prune(study, prefix)


def make_launcher_study(
    storage: str | optuna.storages.BaseStorage,
    name: str = "demo",
    *,
    scenario: tuple[Spec, ...] = SCENARIO,
    slots: int = 2,
    waiting: int = 2,
    running: bool = True,
    epoch_s: float = EPOCH_S,
    pruner: optuna.pruners.BasePruner | None = None,
) -> optuna.Study:
    """A study with exactly what the launcher writes, simulated on ``slots`` slots, in-process.

    Each trial goes to the slot that frees first; it spends ``SETUP_S`` then ``epoch_s`` per
    epoch; ``waiting`` queued tickets stay WAITING and, with ``running``, one more trial is
    still RUNNING on slot 0 after 2 epochs (its times are not written yet, as in the launcher).
    The ASHA pruner of ``CONFIG`` (or ``pruner``; ``NopPruner`` for none of ours) writes its
    settings and its rung records for every trial's reports.
    """
    if isinstance(storage, str):
        storage = open_storage(storage)
    study = optuna.create_study(study_name=name, storage=storage, direction="minimize")
    study.set_user_attr(CONFIG_ATTR, json.dumps(dict(CONFIG, study=name)))
    pruner = pruner or ASHAPruner(min_resource=1, max_resource=9, reduction_factor=3)
    free = [T0 + slot * 0.05 for slot in range(slots)]
    for spec in scenario:
        slot = min(range(slots), key=lambda s: free[s])
        start = free[slot]
        times = [start + SETUP_S + epoch_s * (k + 1) for k in range(len(spec.curve))]
        end = times[-1] + 0.05
        free[slot] = end + GAP_S
        trial = optuna.trial.create_trial(
            state=spec.state,
            value=spec.curve[-1] if spec.state == TrialState.COMPLETE else None,
            params={"lr": spec.lr, "activation": spec.activation},
            distributions=DISTRIBUTIONS,
            user_attrs={
                ATTR.SLOT: slot, ATTR.DEVICE: spec.devices, ATTR.HOST: "box", ATTR.PID: 100 + slot,
                ATTR.LAUNCHER_PID: 99, ATTR.START: start, ATTR.END: end,
                ATTR.EPOCHS: len(spec.curve), ATTR.EPOCH_END_TIMES: times, ATTR.SEED: 0,
                **({ATTR.FAIL_REASON: "RuntimeError: boom"} if spec.state == TrialState.FAIL
                   else {}),
                **({ATTR.STOP_REASON: spec.stop_reason} if spec.stop_reason else {}),
            },
            intermediate_values={k + 1: v for k, v in enumerate(spec.curve)},
        )
        trial.datetime_start = dt.datetime.fromtimestamp(start)
        trial.datetime_complete = dt.datetime.fromtimestamp(end)
        study.add_trial(trial)
        record_rungs(study, pruner, len(study.trials) - 1)
    if running:
        start = min(free)
        trial = optuna.trial.create_trial(
            state=TrialState.RUNNING, params={"lr": 0.05, "activation": "relu"},
            distributions=DISTRIBUTIONS,
            user_attrs={ATTR.SLOT: free.index(start), ATTR.DEVICE: "cpu:0", ATTR.HOST: "box",
                        ATTR.START: start},
            intermediate_values={1: 0.55, 2: 0.4},
        )
        trial.datetime_start = dt.datetime.fromtimestamp(start)
        study.add_trial(trial)
        record_rungs(study, pruner, len(study.trials) - 1)
    for _ in range(waiting):
        study.enqueue_trial({})
    return study


def _gids(fig: Any, prefix: str) -> list[str]:
    ax = fig.axes[0]
    artists = [*ax.lines, *ax.patches, *ax.collections]
    return [a.get_gid() for a in artists if (a.get_gid() or "").startswith(prefix)]


def _points(fig: Any, gid: str) -> int:
    found = [c for c in fig.axes[0].collections if c.get_gid() == gid]
    return sum(len(c.get_offsets()) for c in found)


def _png_shape(path: Path) -> tuple[int, ...]:
    image = matplotlib.image.imread(path)
    return image.shape


@pytest.fixture
def journal(tmp_path: Path) -> str:
    spec = str(tmp_path / "demo.journal")
    make_launcher_study(spec)
    return spec


@pytest.fixture
def study(journal: str) -> optuna.Study:
    return load(journal)


def store_pruner_settings(study: optuna.Study, settings: dict[str, Any]) -> None:
    """Write ``PRUNER_ATTR`` as our pruners do, for a study made without them."""
    storage_of(study).set_study_system_attr(study_id_of(study), PRUNER_ATTR, settings)


#: A study whose best value came from a trial the launcher stopped at its wall-clock budget.
STOPPED_BEST = (
    Spec(TrialState.COMPLETE, (0.5, 0.3, 0.2, 0.15, 0.12, 0.1, 0.08, 0.07, 0.06), 0.1),
    Spec(TrialState.PRUNED, (0.95, 0.92, 0.90), 0.9),  # pruned at rung 3 with 0.90
    Spec(TrialState.COMPLETE, (0.4, 0.2, 0.1, 0.08, 0.06, 0.05, 0.045, 0.042, 0.04), 0.2),
    Spec(TrialState.PRUNED, (0.3, 0.009), 0.3, stop_reason=BUDGET),  # 2 epochs: at rung 1
)


#: A sync_sh study with rungs 2, 4, 8 (min_resource 2, reduction_factor 2, max_resource 8).
PAUSE_CONFIG = dict(CONFIG, study="paused",
                    pruner={"name": "sync_sh", "min_resource": 2, "max_resource": 8,
                            "reduction_factor": 2},
                    trainer={"max_epochs": 8})
PAUSE_RUNGS = (2, 4, 8)
NOT_PROMOTED = "not promoted from rung 2"


def seg(slot: int, start: float, end: float | None, from_epoch: int, to_epoch: int | None,
        how: str | None) -> dict[str, Any]:
    """One ATTR.SEGMENTS entry, times in s after T0, as the launcher writes it."""
    return {"slot": slot, "device": f"cpu:{slot}", "start": T0 + start,
            "end": None if end is None else T0 + end, "from_epoch": from_epoch,
            "to_epoch": to_epoch, "how": how}


def paused_attr(epoch: int, since: float, why: str) -> dict[str, Any]:
    return {"epoch": epoch, "checkpoint": f"/ckpt/e{epoch}.ckpt", "since": T0 + since,
            "target": None, "why": why}


#: trial -> (state, curve, epoch end times (s after T0), user attrs). Trial 0 trains in three
#: segments on slots 0, 1, 0 and completes; 1 waits PAUSED at rung 4 after two segments (and
#: reported the best value); 2 was not promoted from rung 2 (its pause is left behind, as the
#: scheduler leaves it); 3 crashed after 3 epochs on slot 1 and was resumed from its epoch-2
#: checkpoint on slot 0 (epoch 3 trained twice); 4 was stopped by the budget and lists no
#: segment; 5 trains its second segment now.
PAUSE_SCENARIO: dict[int, tuple[TrialState, tuple[float, ...], list[float], dict[str, Any]]] = {
    0: (TrialState.COMPLETE, (0.6, 0.5, 0.4, 0.35, 0.3, 0.27, 0.25, 0.24),
        [1.25, 2.25, 7.25, 8.25, 10.25, 11.25, 12.25, 13.25],
        {ATTR.START: T0, ATTR.END: T0 + 13.5, ATTR.SLOT: 0,
         ATTR.SEGMENTS: [seg(0, 0, 2.5, 0, 2, "paused"), seg(1, 6, 8.5, 2, 4, "paused"),
                         seg(0, 9, 13.5, 4, 8, "complete")]}),
    1: (TrialState.RUNNING, (0.7, 0.55, 0.45, 0.2), [1.3, 2.3, 4.25, 5.25],
        {ATTR.START: T0 + 0.05, ATTR.END: T0 + 5.5, ATTR.SLOT: 0,  # its last segment's end
         ATTR.PAUSED: paused_attr(4, 5.5, "rung 4"),
         ATTR.SEGMENTS: [seg(1, 0.05, 2.55, 0, 2, "paused"), seg(0, 3, 5.5, 2, 4, "paused")]}),
    2: (TrialState.PRUNED, (0.9, 0.8), [3.85, 4.85],
        {ATTR.START: T0 + 2.6, ATTR.END: T0 + 8.6, ATTR.SLOT: 1,
         ATTR.STOP_REASON: NOT_PROMOTED, ATTR.PAUSED: paused_attr(2, 5.1, "rung 2"),
         ATTR.SEGMENTS: [seg(1, 2.6, 5.1, 0, 2, "paused")]}),
    3: (TrialState.COMPLETE, (0.65, 0.5, 0.42, 0.36, 0.31, 0.28, 0.26, 0.23),
        [9.85, 10.85, 15.25, 16.25, 17.25, 18.25, 19.25, 20.25],
        {ATTR.START: T0 + 8.6, ATTR.END: T0 + 20.5, ATTR.SLOT: 0,
         ATTR.ATTEMPTS: ["worker for slot 1 (pid 7) was killed by SIGKILL"],
         ATTR.SEGMENTS: [seg(1, 8.6, 12.0, 0, 3, "crashed"),
                         seg(0, 14.0, 20.5, 2, 8, "complete")]}),
    4: (TrialState.PRUNED, (0.85, 0.75), [13.75, 14.75],
        {ATTR.START: T0 + 12.5, ATTR.END: T0 + 15.0, ATTR.SLOT: 1, ATTR.STOP_REASON: BUDGET}),
    5: (TrialState.RUNNING, (0.75, 0.6, 0.5), [16.75, 17.75],
        {ATTR.START: T0 + 15.5, ATTR.END: T0 + 18.0, ATTR.SLOT: 1, ATTR.TARGET: 4,
         ATTR.SEGMENTS: [seg(1, 15.5, 18.0, 0, 2, "paused"), seg(1, 19.0, None, 2, None, None)]}),
}
#: Seconds each trial trained (its segments, pauses left out), all on one device.
PAUSE_TRAINED_S = {0: 9.5, 1: 5.0, 2: 2.5, 3: 9.9, 4: 2.5, 5: 2.5}


def make_paused_study(storage: str | optuna.storages.BaseStorage) -> optuna.Study:
    """:data:`PAUSE_SCENARIO` as the launcher's scheduler leaves it, with one ticket WAITING;
    the schedule's rung ladder is stored where the pruners store theirs."""
    if isinstance(storage, str):
        storage = open_storage(storage)
    study = optuna.create_study(study_name="paused", storage=storage, direction="minimize")
    study.set_user_attr(CONFIG_ATTR, json.dumps(PAUSE_CONFIG))
    store_pruner_settings(study, {"name": "sync_sh", "min_resource": 2, "reduction_factor": 2,
                                  "max_resource": 8, "brackets": [list(PAUSE_RUNGS)],
                                  "budgets": []})
    for number, (state, curve, times, attrs) in PAUSE_SCENARIO.items():
        trial = optuna.trial.create_trial(
            state=state, value=curve[-1] if state == TrialState.COMPLETE else None,
            params={"lr": 0.1 + number / 100, "activation": "relu"}, distributions=DISTRIBUTIONS,
            user_attrs={ATTR.DEVICE: "cpu:0", ATTR.HOST: "box",
                        ATTR.EPOCH_END_TIMES: [T0 + x for x in times], **attrs},
            intermediate_values={k + 1: v for k, v in enumerate(curve)},
        )
        study.add_trial(trial)
        assert study.trials[-1].number == number
    study.enqueue_trial({})
    return study


@pytest.fixture(params=["inmemory", "journal"])
def paused_study(request: pytest.FixtureRequest, tmp_path: Path) -> optuna.Study:
    if request.param == "inmemory":
        return make_paused_study(optuna.storages.InMemoryStorage())
    spec = str(tmp_path / "paused.journal")
    make_paused_study(spec)
    return load(spec)  # read back from the file


def _open(slot: int, start: float, from_epoch: int) -> dict[str, Any]:
    """The entry the launcher lists when a segment starts: no end yet."""
    return seg(slot, start, None, from_epoch, None, "running")


#: trial -> (state, curve, epoch end times (s after T0), user attrs). 0 completed in three
#: segments; its last one's open entry is left beside the closed one, and its first is listed
#: twice. 1 crashed in its second segment and waits PAUSED at epoch 2: the dead worker's open
#: entry is left beside the supervisor's crash record (whose clock says 10.1, not 10.2). 2 trains
#: its second segment now (an open entry). 3 trained in one go. 4 waits PAUSED after a crash
#: in its third segment whose record starts at its first segment's start (where the supervisor
#: wrote it for a resumed trial) and whose open entry is left behind. 5's second segment died
#: unrecorded after its epoch 2 (its open entry left, that epoch's end time kept) and a third
#: completed it. 6 completed while its last segment's entry was still open.
OPEN_SCENARIO: dict[int, tuple[TrialState, tuple[float, ...], list[float], dict[str, Any]]] = {
    0: (TrialState.COMPLETE, (0.8, 0.7, 0.6, 0.5, 0.45, 0.4, 0.35, 0.3),
        [1, 2, 4, 5, 7, 8, 9, 10],
        {ATTR.START: T0, ATTR.END: T0 + 10, ATTR.SLOT: 0, ATTR.EPOCHS: 8,
         ATTR.SEGMENTS: [seg(0, 0, 2, 0, 2, "paused"), seg(0, 0, 2, 0, 2, "paused"),
                         seg(1, 3, 5, 2, 4, "paused"), _open(0, 6, 4),
                         seg(0, 6, 10, 4, 8, "complete")]}),
    1: (TrialState.RUNNING, (0.9, 0.8, 0.75), [1.5, 2.5],
        {ATTR.START: T0 + 0.5, ATTR.END: T0 + 2.5, ATTR.SLOT: 0, ATTR.EPOCHS: 3,
         ATTR.PAUSED: {**paused_attr(2, 11.6, "worker died; resumed from epoch 2"),
                       "target": 8},
         ATTR.SEGMENTS: [seg(1, 0.5, 2.5, 0, 2, "paused"), _open(0, 10.2, 2),
                         seg(0, 10.1, 11.5, 2, 3, "crashed")]}),
    2: (TrialState.RUNNING, (0.85, 0.7, 0.65), [3.8, 5.5],
        {ATTR.START: T0 + 2.2, ATTR.END: T0 + 5.8, ATTR.SLOT: 1, ATTR.EPOCHS: 2,
         ATTR.SEGMENTS: [seg(0, 2.2, 5.8, 0, 2, "paused"), _open(1, 12, 2)]}),
    3: (TrialState.COMPLETE, (0.6, 0.4, 0.3, 0.2), [12.2, 12.8, 13.4, 14.0],
        {ATTR.START: T0 + 11.6, ATTR.END: T0 + 14, ATTR.SLOT: 0, ATTR.EPOCHS: 4}),
    4: (TrialState.RUNNING, (0.95, 0.9, 0.85, 0.8, 0.78), [1, 2, 4, 5],
        {ATTR.START: T0, ATTR.END: T0 + 8, ATTR.SLOT: 2, ATTR.EPOCHS: 5,
         ATTR.PAUSED: {**paused_attr(4, 8.1, "worker died; resumed from epoch 4"), "target": 8},
         ATTR.SEGMENTS: [seg(2, 0, 2, 0, 2, "paused"), seg(2, 3, 5, 2, 4, "paused"),
                         _open(2, 6, 4), seg(2, 0, 8, 4, 5, "crashed")]}),
    5: (TrialState.COMPLETE, (0.7, 0.6, 0.5, 0.45), [10, 11.5, 12.5, 13],
        {ATTR.START: T0 + 9, ATTR.END: T0 + 13, ATTR.SLOT: 2, ATTR.EPOCHS: 4,
         ATTR.SEGMENTS: [seg(2, 9, 10, 0, 1, "paused"), _open(2, 10.5, 1),
                         seg(2, 12, 13, 2, 4, "complete")]}),
    6: (TrialState.COMPLETE, (0.75, 0.65, 0.55), [7.5, 10, 11.5],
        {ATTR.START: T0 + 6.5, ATTR.END: T0 + 11.5, ATTR.SLOT: 1, ATTR.EPOCHS: 3,
         ATTR.SEGMENTS: [seg(1, 6.5, 8, 0, 1, "paused"), _open(1, 9, 1)]}),
}
#: Each trial's segments once settled: (slot, start, end (s after T0; None in flight), how).
OPEN_SPANS = {
    0: [(0, 0, 2, "paused"), (1, 3, 5, "paused"), (0, 6, 10, "complete")],
    1: [(1, 0.5, 2.5, "paused"), (0, 10.1, 11.5, "crashed")],
    2: [(0, 2.2, 5.8, "paused"), (1, 12, None, "running")],
    3: [(0, 11.6, 14, None)],
    4: [(2, 0, 2, "paused"), (2, 3, 5, "paused"), (2, 5, 8, "crashed")],
    5: [(2, 9, 10, "paused"), (2, 10.5, 11.5, None), (2, 12, 13, "complete")],
    6: [(1, 6.5, 8, "paused"), (1, 9, 11.5, None)],
}


def make_open_segment_study(storage: str) -> optuna.Study:
    """:data:`OPEN_SCENARIO` in a new study (plain: no config, no pruner settings)."""
    study = optuna.create_study(study_name="open", storage=open_storage(storage))
    for number, (state, curve, times, attrs) in OPEN_SCENARIO.items():
        study.add_trial(optuna.trial.create_trial(
            state=state, value=curve[-1] if state == TrialState.COMPLETE else None,
            params={"lr": 0.1 + number / 100}, distributions={"lr": DISTRIBUTIONS["lr"]},
            user_attrs={ATTR.DEVICE: "cpu:0", ATTR.HOST: "box",
                        ATTR.EPOCH_END_TIMES: [T0 + x for x in times], **attrs},
            intermediate_values={k + 1: v for k, v in enumerate(curve)},
        ))
    return study


@pytest.fixture
def open_study(tmp_path: Path) -> optuna.Study:
    return make_open_segment_study(f"sqlite:///{tmp_path / 'open.db'}")


# ---------------------------------------------------------------------------------------------
# Several objectives: a study as the launcher and the PruningCallback leave it


#: The objectives of the multi-objective studies, both minimised.
MO_METRICS = ("validation_error", "latency_ms")
MO_CONFIG = dict(CONFIG, study="mo", metric=list(MO_METRICS), direction=["minimize", "minimize"],
                 pruner={"name": "asha", "min_resource": 1, "max_resource": 3,
                         "reduction_factor": 3},
                 trainer={"max_epochs": 3})


@dataclass(frozen=True)
class MoSpec:
    """One simulated trial of a study with several objectives: its state and its values after
    each epoch (a COMPLETE trial returns its last ones)."""

    state: TrialState
    points: tuple[tuple[float, ...], ...]
    lr: float


#: Trial 0, 1 and 5 end on the Pareto front of final values, 3 behind 0; 4 was PRUNED at epoch
#: 2 with the lowest latency of all (on the front of every value reported); 6 FAILed; 7 is still
#: RUNNING (its values written each epoch, its times not yet).
MO_SCENARIO = (
    MoSpec(TrialState.COMPLETE, ((0.5, 20.0), (0.3, 20.0), (0.2, 20.0)), 0.1),
    MoSpec(TrialState.COMPLETE, ((0.6, 10.0), (0.4, 10.0), (0.35, 10.0)), 0.2),
    MoSpec(TrialState.PRUNED, ((0.7, 30.0),), 0.9),
    MoSpec(TrialState.COMPLETE, ((0.45, 25.0), (0.3, 25.0), (0.25, 25.0)), 0.3),
    MoSpec(TrialState.PRUNED, ((0.5, 5.0), (0.45, 5.0)), 0.05),
    MoSpec(TrialState.COMPLETE, ((0.8, 8.0), (0.5, 8.0), (0.4, 8.0)), 0.15),
    MoSpec(TrialState.FAIL, ((0.9, 40.0),), 0.5),
    MoSpec(TrialState.RUNNING, ((0.55, 12.0),), 0.02),
)


def make_mo_study(
    storage: str | optuna.storages.BaseStorage,
    name: str = "mo",
    *,
    scenario: tuple[MoSpec, ...] = MO_SCENARIO,
    metrics: tuple[str, ...] = MO_METRICS,
    directions: tuple[str, ...] = ("minimize", "minimize"),
    epoch_s: float = EPOCH_S,
    slots: int = 2,
) -> optuna.Study:
    """A study with several objectives, asked and told as the launcher does, simulated on
    ``slots`` slots in-process: each epoch's values in ``objective_values`` (the ASHA pruner of
    :data:`MO_CONFIG` deciding on each, which writes its vector rung records), the launcher's
    times and slots, Optuna's metric names, and the config with the metric and direction lists.
    """
    if isinstance(storage, str):
        storage = open_storage(storage)
    study = optuna.create_study(study_name=name, storage=storage, directions=list(directions))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names(list(metrics))
    study.set_user_attr(CONFIG_ATTR, json.dumps(dict(
        MO_CONFIG, study=name, metric=list(metrics), direction=list(directions))))
    pruner = ASHAPruner(min_resource=1, max_resource=3, reduction_factor=3)
    free = [T0 + slot * 0.05 for slot in range(slots)]
    for spec in scenario:
        slot = min(range(slots), key=lambda s: free[s])
        start = free[slot]
        times = [start + SETUP_S + epoch_s * (k + 1) for k in range(len(spec.points))]
        end = times[-1] + 0.05
        free[slot] = end + GAP_S
        study.enqueue_trial({"lr": spec.lr})
        trial = study.ask({"lr": DISTRIBUTIONS["lr"]})
        for key, value in {ATTR.SLOT: slot, ATTR.DEVICE: f"cpu:{slot}", ATTR.HOST: "box",
                           ATTR.START: start}.items():
            trial.set_user_attr(key, value)
        for epoch, point in enumerate(spec.points, 1):
            trial.set_user_attr(ATTR.OBJECTIVE_VALUES, with_objective_values(trial, epoch, point))
            pruner.prune(study, study.get_trials(deepcopy=False)[trial.number])
        if spec.state == TrialState.RUNNING:
            continue
        for key, value in {ATTR.END: end, ATTR.EPOCHS: len(spec.points),
                           ATTR.EPOCH_END_TIMES: times}.items():
            trial.set_user_attr(key, value)
        if spec.state == TrialState.COMPLETE:
            study.tell(trial, list(spec.points[-1]))
        else:
            study.tell(trial, state=spec.state)
    return study
