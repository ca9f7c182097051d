"""Pause and resume: random search vs stopping ASHA vs promotion ASHA vs synchronous SH.

What is measured, all through the launcher (``lightning_hpo.launch.run``) on 2 CPU slots with one
torch thread each, on a problem where the low-fidelity ranking matters: LeNet on scikit-learn's
digits, where an *epoch* is a quarter of the training set (``trainer.limit_train_batches:
0.25``: 1 to 11 SGD steps), at most 27 epochs a trial, and a wide space (lr loguniform [1e-3,
1], momentum uniform [0, 0.95], activation relu or sigmoid, batch_size randint [32, 256]): many
configurations never learn, and a good one needs most of its 27 epochs. Every method runs with
the same random-sampler seed and the same training budget, each in its own study:

* ``random``: asynchronous random search, no pruner: every trial trains 27 epochs (the baseline);
* ``asha-stop``: ASHA, ``mode: stop`` (rungs 1, 3, 9, 27; ``reduction_factor`` 3);
* ``asha-promotion``: promotion-type ASHA (``mode: promotion``), the same rungs;
* ``sync-sh``: synchronous successive halving (``sync_sh``), rounds of 27 configurations on the
  same rungs, promoted ones continued from their checkpoint (81 epochs a round);
* ``sync-sh-scratch``: the same with ``resume: false``: promoted ones retrain from epoch 0 (108).

The budget (``--budget``, seconds) counts from the moment the run's first trial starts: the
workers' start-up (importing torch and Lightning, 9 to 31 s per run on the shared 2-core
machine, depending on its load) is left out, so every method gets the same training time. The
script ends the run then as Ctrl-C would (SIGINT to itself: the launcher pauses the running
trials at their last checkpoint and returns); the launcher's own ``stop.max_wallclock_time`` is
set 120 s beyond, as a safety net.

How: each trial's training segments (user attribute ``segments``: slot, start, end,
``from_epoch``, ``to_epoch``) and epoch end times become one time-ordered stream of *trained*
epochs over all trials (an epoch trained again by a retrain from scratch counts as compute but
reports nothing new), cut at the budget. The incumbent is the best ``validation_error`` of any
epoch so far; *epochs to reach* a value is the number of epochs trained, summed over all trials,
until it was first reported; *seconds* the time from the first trial's start. Per seed the
target is random search's final best, and the ratio is a method's epochs / random search's own
epochs to reach it. Also per run: the slot idle fraction, 1 - (sum of segment durations) /
(slots x wall time), over the budget and over the whole run (start-up and shutdown included);
slot-seconds of segments per epoch (an epoch plus each segment's own start: trainer, data,
checkpoint load); and the peak bytes of resume checkpoints on disk (every
``trial_*/resume.ckpt``, polled every 0.2 s: a finished trial's checkpoint is deleted, so a sum
at the end would miss the peak).

Two fixed measurements besides:

* the textbook round, through the launcher: ``sync_sh`` with ``min_resource`` 2,
  ``max_resource`` 10, ``reduction_factor`` 2 and ``n_trials: 8`` (rungs 2, 4, 8, 10 with 8, 4,
  2, 1 configurations), with and without ``resume``: the sum of every trial's
  ``epochs_trained`` (retrains included), the trials' end states, and the run's seconds;
* the cost of a resume checkpoint: :class:`~lightning_hpo.checkpointing.ResumeCheckpoint`'s own
  ``save_seconds``, ``load_seconds`` and ``epoch_seconds`` for LeNet (batch 128, one thread,
  the worker's checkpoint callbacks), save + load as a fraction of one epoch of this benchmark,
  and of one full digits epoch for context.

Targets (issue 11; printed PASS or MISS, never lowered):

* the textbook round trains 34 epochs with resume and 58 without;
* promotion ASHA needs no more epochs than stopping ASHA to reach random search's best (median
  over seeds; a seed that never reaches it counts as infinitely many; neither reaching it is a
  miss);
* both ASHAs need at most 1/3 of random search's epochs (median of the per-seed ratios);
* saving plus loading a checkpoint costs under 5% of an epoch.

    python benchmarks/bench_promotion.py            # 5 methods x seeds 0 1 2 x 30 s (~12 min)
    python benchmarks/bench_promotion.py --quick    # smoke: random, promotion, seed 0, 15 s
    python benchmarks/bench_promotion.py --seeds 0 1 2 3 4 --budget 90
    python benchmarks/bench_promotion.py --analyze-only   # re-read the journals in --out

Compare two stored studies afterwards, e.g.::

    python -m lightning_hpo.report --compare \\
        asha-stop-seed0@runs/bench_promotion/asha-stop-seed0.journal \\
        asha-promotion-seed0@runs/bench_promotion/asha-promotion-seed0.journal
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import math
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from _record import Figure, machine_line, write_figures
from bench_search import EpochEvent, epoch_events, epochs_to_reach, final_best
from optuna.trial import FrozenTrial, TrialState

from lightning_hpo.schema import ATTR, Segment

METHODS = ("random", "asha-stop", "asha-promotion", "sync-sh", "sync-sh-scratch")
QUICK_METHODS = ("random", "asha-promotion")
BASELINE = "random"
MIN_RESOURCE, MAX_RESOURCE, REDUCTION_FACTOR = 1, 27, 3
LIMIT_TRAIN_BATCHES = 0.25  # an epoch is a quarter of the training set
SPACE = {
    "lr": {"loguniform": [1e-3, 1.0]},
    "momentum": {"uniform": [0.0, 0.95]},
    "activation": {"choice": ["relu", "sigmoid"]},
    "batch_size": {"randint": [32, 256]},
}
#: The textbook round: sync_sh (min_resource, max_resource, reduction_factor), n_trials, and the
#: epochs it must train with and without resume (issue 11).
ROUND = (2, 10, 2)
ROUND_TRIALS = 8
ROUND_TARGET = {True: 34, False: 58}
ROUND_PRUNED_AT = {2: 4, 4: 2, 8: 1}  # epochs a pruned trial stopped at: how many trials
TARGET_RATIO = 1 / 3
TARGET_CHECKPOINT = 0.05  # save + load, as a fraction of an epoch
POLL_SECONDS = 0.2
#: Seconds the launcher's own wall-clock stop leaves for start-up beyond the training budget.
STARTUP_ALLOWANCE = 120.0
#: Study user attribute this benchmark writes after a run (start, window, wall, peak bytes).
BENCH_ATTR = "lightning_hpo:bench_promotion"


# -- the pure part: segments -> one time-ordered stream of trained epochs ----------------------


def _segments(trial: FrozenTrial) -> list[Segment]:
    """The trial's closed segments that say their epochs, by start time."""
    raw = trial.user_attrs.get(ATTR.SEGMENTS)
    read = [Segment.read(entry) for entry in raw] if isinstance(raw, list) else []
    return sorted((s for s in read if s is not None and s.end is not None
                   and s.from_epoch is not None and s.to_epoch is not None),
                  key=lambda s: s.start)


def trained_epochs(trials: Iterable[FrozenTrial], until: float | None = None) -> list[EpochEvent]:
    """Every epoch any trial trained, retrains included, merged into one stream sorted by time.

    A segment trains epochs ``from_epoch + 1 .. to_epoch``. An epoch beyond what the trial had
    trained before is new: its time is the trial's ``epoch_end_times`` entry and its value the
    intermediate value at that step. An epoch at or below it is trained again (a promotion
    retrained from scratch): it costs compute but reports nothing (value NaN), and since only
    the first end time of an epoch is stored, its time is spread evenly between the segment's
    start and the end of the segment's first new epoch (or the segment's end). A trial without
    segments falls back to its epoch end times (:func:`bench_search.epoch_events`). Events after
    ``until`` (unix s) are left out.

    Example (rung 2, then a retrain from scratch to epoch 4)::

        >>> t = optuna.trial.create_trial(state=TrialState.COMPLETE, value=0.2,
        ...     intermediate_values={1: 0.9, 2: 0.5, 3: 0.3, 4: 0.2},
        ...     user_attrs={"epoch_end_times": [1.0, 2.0, 13.0, 14.0], "segments": [
        ...         {"start": 0.0, "end": 2.0, "from_epoch": 0, "to_epoch": 2},
        ...         {"start": 10.0, "end": 14.0, "from_epoch": 0, "to_epoch": 4}]})
        >>> [(e.time, e.epoch, e.value) for e in trained_epochs([t])]
        [(1.0, 1, 0.9), (2.0, 2, 0.5), (11.0, 1, nan), (12.0, 2, nan), (13.0, 3, 0.3),
         (14.0, 4, 0.2)]
    """
    events: list[EpochEvent] = []
    for trial in trials:
        segments = _segments(trial)
        if not segments:
            events += epoch_events([trial])
            continue
        times = [float(t) for t in trial.user_attrs.get(ATTR.EPOCH_END_TIMES) or []]
        values = trial.intermediate_values
        known = 0
        for segment in segments:
            first, last = segment.from_epoch or 0, segment.to_epoch or 0
            new = [e for e in range(max(first, known) + 1, last + 1) if e <= len(times)]
            again = list(range(first + 1, min(last, known) + 1))
            stop = times[new[0] - 1] if new else segment.end
            steps = len(again) + (1 if new else 0)
            for index, epoch in enumerate(again, start=1):
                when = segment.start + index / steps * (stop - segment.start)
                events.append(EpochEvent(when, trial.number, epoch, math.nan))
            for epoch in new:
                value = float(values.get(epoch, math.nan))
                events.append(EpochEvent(times[epoch - 1], trial.number, epoch, value))
            known = max(known, last)
    if until is not None:
        events = [e for e in events if e.time <= until]
    events.sort(key=lambda e: (e.time, e.trial, e.epoch))
    return events


def busy_seconds(trials: Iterable[FrozenTrial], start: float, end: float) -> float:
    """Seconds of training segments inside the window ``[start, end]`` (unix s), summed."""
    total = 0.0
    for trial in trials:
        for segment in _segments(trial):
            total += max(0.0, min(segment.end, end) - max(segment.start, start))
    return total


def idle_fraction(trials: Iterable[FrozenTrial], slots: int, start: float, end: float) -> float:
    """``1 - busy / (slots * wall)``: the share of slot time no segment trained, in ``[0, 1]``.

    Example (2 slots for 10 s, segments of 6 s and 4 s)::

        >>> t = optuna.trial.create_trial(state=TrialState.COMPLETE, value=0.1, user_attrs={
        ...     "segments": [{"start": 0.0, "end": 6.0, "from_epoch": 0, "to_epoch": 3},
        ...                  {"start": 6.0, "end": 10.0, "from_epoch": 3, "to_epoch": 9}]})
        >>> idle_fraction([t], slots=2, start=0.0, end=10.0)
        0.5
    """
    if slots < 1 or end <= start:
        raise ValueError(f"slots is {slots} and the window {end - start:g} s; both must be > 0")
    return min(1.0, max(0.0, 1.0 - busy_seconds(trials, start, end) / (slots * (end - start))))


def first_start(trials: Iterable[FrozenTrial]) -> float | None:
    """When the first segment of any trial started (unix s); None when there is none."""
    starts = [segment.start for trial in trials for segment in _segments(trial)]
    return min(starts, default=None)


def checkpoint_bytes(folder: Path) -> tuple[int, int]:
    """``(bytes, files)`` of the resume checkpoints under ``folder`` now: every
    ``trial_*/resume.ckpt`` and any ``resume.ckpt.tmp`` being written. Files that vanish while
    being read (a trial finished) are skipped."""
    total = files = 0
    for path in folder.glob("trial_*/resume.ckpt*"):
        if path.name not in ("resume.ckpt", "resume.ckpt.tmp"):
            continue
        with contextlib.suppress(OSError):
            total += path.stat().st_size
            files += 1
    return total, files


class RunWatcher:
    """Watches a run's folder from a thread while the block runs: the peak of
    :func:`checkpoint_bytes`, and, with ``window``, the training budget: ``window`` seconds
    after the first ``trial_*`` folder appeared it sends this process SIGINT once, which the
    launcher's supervisor takes as Ctrl-C (every running trial pauses at its last checkpoint,
    the run returns the study).

    Why not ``stop.max_wallclock_time`` alone: it counts from the launcher's start, and the
    workers' start-up (importing torch and Lightning) took 9 to 31 s per run on the shared
    2-core machine; a budget counted from the first trial's start gives every method the same
    training time whatever the load.
    """

    def __init__(self, folder: Path, window: float | None = None,
                 interval: float = POLL_SECONDS) -> None:
        self.folder, self.window, self.interval = folder, window, interval
        self.peak_bytes = self.peak_files = 0
        self.first_seen: float | None = None  # unix s: the first trial folder was there
        self.stopped_at: float | None = None  # unix s: SIGINT sent
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True, name="run-watcher")

    def _poll(self) -> None:
        while True:
            size, files = checkpoint_bytes(self.folder)
            self.peak_bytes = max(self.peak_bytes, size)
            self.peak_files = max(self.peak_files, files)
            now = time.time()
            if self.first_seen is None and any(self.folder.glob("trial_*")):
                self.first_seen = now
            if (self.window is not None and self.first_seen is not None
                    and self.stopped_at is None and now >= self.first_seen + self.window):
                self.stopped_at = now
                os.kill(os.getpid(), signal.SIGINT)
            if self._done.wait(self.interval):
                return

    def __enter__(self) -> RunWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def median_epochs(hits: Sequence[int | None]) -> float:
    """Median epochs to reach a target over seeds; a seed that never reached it counts as +inf.

    Example::

        >>> median_epochs([120, None, 80])
        120
    """
    return statistics.median([math.inf if h is None else h for h in hits]) if hits else math.nan


def round_outcome(trials: Sequence[FrozenTrial]) -> tuple[int, dict[str, int], dict[int, int]]:
    """The textbook round's figures: epochs trained in all (``epochs_trained`` summed, retrains
    included), trial states, and epochs reached -> trials for the PRUNED ones."""
    epochs = sum(int(t.user_attrs.get(ATTR.EPOCHS_TRAINED) or 0) for t in trials)
    states: dict[str, int] = {}
    pruned_at: dict[int, int] = {}
    for trial in trials:
        states[trial.state.name] = states.get(trial.state.name, 0) + 1
        if trial.state == TrialState.PRUNED:
            last = max(trial.intermediate_values, default=0)
            reached = int(trial.user_attrs.get(ATTR.EPOCHS) or last)
            pruned_at[reached] = pruned_at.get(reached, 0) + 1
    return epochs, states, dict(sorted(pruned_at.items()))


def round_as_expected(epochs: int, states: Mapping[str, int], pruned_at: Mapping[int, int],
                      resume: bool) -> bool:
    """Whether one textbook round trained ``ROUND_TARGET[resume]`` epochs, with one trial
    COMPLETE and the others PRUNED at 2 (four), 4 (two) and 8 (one)."""
    return (epochs == ROUND_TARGET[resume] and dict(states) == {"COMPLETE": 1, "PRUNED": 7}
            and dict(pruned_at) == ROUND_PRUNED_AT)


# -- configs and runs ---------------------------------------------------------------------------


def study_name(method: str, seed: int) -> str:
    """``asha-promotion-seed0``: the study (and journal file) name of one run."""
    return f"{method}-seed{seed}"


def _devices(workers: int) -> dict[str, Any]:
    return {"accelerator": "cpu", "count": workers, "per_trial": 1, "trials_per_device": 1}


def build_config(method: str, seed: int, budget: float, storage: str, run_dir: str,
                 workers: int) -> dict[str, Any]:
    """The launcher config of one (method, seed) run, as the raw mapping. ``budget`` is the
    training budget in seconds (:class:`RunWatcher` ends the run); the launcher's own
    ``stop.max_wallclock_time`` is a safety net :data:`STARTUP_ALLOWANCE` seconds beyond it."""
    ladder = {"min_resource": MIN_RESOURCE, "max_resource": MAX_RESOURCE,
              "reduction_factor": REDUCTION_FACTOR}
    trainer: dict[str, Any] = {"limit_train_batches": LIMIT_TRAIN_BATCHES}
    pruner: Any
    if method == "random":
        pruner, trainer["max_epochs"] = "none", MAX_RESOURCE
    elif method in ("asha-stop", "asha-promotion"):
        pruner = {"name": "asha", "mode": method.removeprefix("asha-"), **ladder}
    elif method in ("sync-sh", "sync-sh-scratch"):
        pruner = {"name": "sync_sh", "resume": method == "sync-sh", **ladder}
    else:
        raise ValueError(f"method is {method!r}; allowed: {', '.join(METHODS)}")
    return {
        "study": study_name(method, seed), "storage": storage, "run_dir": run_dir,
        "model": {"name": "lenet"}, "data": {"name": "digits"},
        "metric": "validation_error", "direction": "minimize", "space": SPACE, "initial": [],
        "sampler": {"name": "random", "seed": seed}, "pruner": pruner, "trainer": trainer,
        "devices": _devices(workers),
        "stop": {"max_wallclock_time": budget + STARTUP_ALLOWANCE},
    }


def round_config(resume: bool, storage: str, run_dir: str, workers: int) -> dict[str, Any]:
    """The textbook round: ``sync_sh`` 2..10, eta 2, 8 configurations, seed 0."""
    low, high, eta = ROUND
    return {
        "study": f"round-{'resume' if resume else 'scratch'}", "storage": storage,
        "run_dir": run_dir, "model": {"name": "lenet"}, "data": {"name": "digits"},
        "metric": "validation_error", "direction": "minimize", "space": SPACE, "initial": [],
        "sampler": {"name": "random", "seed": 0},
        "pruner": {"name": "sync_sh", "min_resource": low, "max_resource": high,
                   "reduction_factor": eta, "resume": resume},
        "trainer": {"limit_train_batches": LIMIT_TRAIN_BATCHES}, "devices": _devices(workers),
        "stop": {"n_trials": ROUND_TRIALS, "max_wallclock_time": 600},
    }


def run_study(raw: dict[str, Any], window: float | None = None,
              log: io.TextIOBase | None = None) -> optuna.Study:
    """Run one study with ``lightning_hpo.launch.run`` under a :class:`RunWatcher` (stopped
    ``window`` seconds after its first trial started, when given); stores in the study what the
    analysis needs: when ``run`` was called (unix s), its wall seconds, the window, the slots and
    the peak checkpoint bytes and files."""
    from lightning_hpo.launch import run

    folder = Path(raw["run_dir"]) / raw["study"]
    watcher = RunWatcher(folder, window)

    def on_sigint(signum: int, frame: Any) -> None:
        # The launcher's supervisor has its own handler while it runs; this one only sees a
        # SIGINT outside it: a real Ctrl-C, or the watcher's, late, after the run ended itself.
        if watcher.stopped_at is None:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    started = time.time()
    try:
        with watcher, contextlib.redirect_stdout(log or io.StringIO()):
            study = run(raw)
    finally:
        signal.signal(signal.SIGINT, previous)
    study.set_user_attr(BENCH_ATTR, {
        "t0": started, "wall": time.time() - started, "slots": raw["devices"]["count"],
        "window": window, "peak_bytes": watcher.peak_bytes, "peak_files": watcher.peak_files,
    })
    return study


def _warm_up() -> None:
    """Import what ``run`` imports in this process (torch, Lightning, the registry) before the
    first run, so that the first run's start-up column shows its workers' start-up, as the
    others do, and not this process's imports."""
    import lightning  # noqa: F401

    import lightning_hpo.builtin.models  # noqa: F401
    import lightning_hpo.launch.runner  # noqa: F401


# -- the checkpoint's cost ----------------------------------------------------------------------


@contextlib.contextmanager
def _quiet_lightning() -> Iterator[None]:
    """Lightning's info lines and warnings off while the block runs (this script's output is
    its tables)."""
    loggers = [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric")]
    levels = [logger.level for logger in loggers]
    try:
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


@dataclass(frozen=True)
class CheckpointCost:
    """Medians in seconds; ``bytes`` is the file's size."""

    save: float
    load: float
    epoch: float
    bytes: int

    @property
    def fraction(self) -> float:
        """(save + load) / epoch."""
        return (self.save + self.load) / self.epoch


def measure_checkpoint(limit_train_batches: float, epochs: int = 4, resumes: int = 3,
                       batch_size: int = 128) -> CheckpointCost:
    """Train LeNet on digits with a ``ResumeCheckpoint`` saving every epoch, then resume it
    ``resumes`` times for one more epoch each; one torch thread, callbacks as in the worker."""
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import ModelCheckpoint

    from lightning_hpo.builtin.data import DigitsDataModule
    from lightning_hpo.builtin.models import LeNet
    from lightning_hpo.checkpointing import RandomState, ResumeCheckpoint

    torch.set_num_threads(1)
    saves, loads, epoch_times = [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-ckpt-") as tmp, _quiet_lightning():
        path = Path(tmp) / "resume.ckpt"
        for index in range(resumes + 1):
            L.seed_everything(index, verbose=False)
            resume = ResumeCheckpoint(path, every="epoch")
            trainer = L.Trainer(
                max_epochs=epochs + index, limit_train_batches=limit_train_batches,
                accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                enable_model_summary=False, default_root_dir=tmp,
                callbacks=[ModelCheckpoint(dirpath=tmp, filename="best",
                                           monitor="validation_error"),
                           RandomState(), resume],
            )
            trainer.fit(LeNet(lr=0.1), datamodule=DigitsDataModule(batch_size=batch_size),
                        ckpt_path=str(path) if index else None, weights_only=True)
            saves += resume.save_seconds
            epoch_times += resume.epoch_seconds
            if resume.load_seconds is not None:
                loads.append(resume.load_seconds)
        size = path.stat().st_size
    return CheckpointCost(statistics.median(saves), statistics.median(loads),
                          statistics.median(epoch_times), size)


# -- analysis and printing ----------------------------------------------------------------------


@dataclass
class RunResult:
    """One (method, seed) study after the run; times in unix seconds, durations in seconds."""

    method: str
    seed: int
    t0: float  # run() called
    start: float  # the first segment started (workers up)
    window: float  # seconds of training compared, from ``start``
    wall: float  # run() called to returned
    events: list[EpochEvent]  # trained in the window
    counts: dict[str, int]  # trial states at the end (a paused trial is RUNNING)
    idle_run: float  # idle fraction over [t0, t0 + wall]
    idle_window: float  # idle fraction over [start, start + window]
    busy_window: float  # slot-seconds of segments within [start, start + window]
    peak_bytes: int
    peak_files: int
    fail_reasons: list[str] = field(default_factory=list)

    @property
    def epochs(self) -> int:
        """Epochs trained within the window, retrains included."""
        return len(self.events)

    @property
    def seconds_per_epoch(self) -> float:
        """Slot-seconds of segments per epoch trained in the window: an epoch's time plus each
        segment's own start-up (trainer, data, checkpoint load) shared over its epochs."""
        return self.busy_window / self.epochs if self.epochs else math.nan

    @property
    def startup(self) -> float:
        """Seconds from ``run()`` to the first segment's start (worker start-up)."""
        return self.start - self.t0


def analyze(method: str, seed: int, trials: Sequence[FrozenTrial],
            info: Mapping[str, Any]) -> RunResult:
    """One run's figures from its trials and what :func:`run_study` stored (``info``): its
    epochs are cut ``info["window"]`` seconds after its first segment started."""
    t0, wall, slots = float(info["t0"]), float(info["wall"]), int(info["slots"])
    start = first_start(trials)
    window = float(info["window"]) if start is not None else 0.0
    start = t0 if start is None else start
    counts: dict[str, int] = {}
    for trial in trials:
        counts[trial.state.name] = counts.get(trial.state.name, 0) + 1
    idle_window = idle_fraction(trials, slots, start, start + window) if window > 0 else math.nan
    reasons = [str(t.user_attrs.get(ATTR.FAIL_REASON)) for t in trials
               if t.state == TrialState.FAIL]
    return RunResult(
        method, seed, t0, start, window, wall, trained_epochs(trials, until=start + window),
        counts, idle_fraction(trials, slots, t0, t0 + wall), idle_window,
        busy_seconds(trials, start, start + window), int(info["peak_bytes"]),
        int(info["peak_files"]), reasons,
    )


def load_run(storage: str, name: str) -> tuple[list[FrozenTrial], dict[str, Any]]:
    """One stored study's trials and what :func:`run_study` stored in it."""
    from lightning_hpo.storage import open_storage

    study = optuna.load_study(study_name=name, storage=open_storage(storage, create=False))
    info = study.user_attrs.get(BENCH_ATTR)
    if not isinstance(info, dict):
        raise SystemExit(f"{storage}: study {name} was not written by this script (no start "
                         "time); run it without --analyze-only")
    return study.get_trials(deepcopy=False), info


def _fmt(value: float | None, digits: int = 4) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _ratio_text(value: float) -> str:
    return "not reached" if math.isinf(value) else "-" if math.isnan(value) else f"{value:.2f}"


def _epochs_text(value: float) -> str:
    return "not reached" if math.isinf(value) else "-" if math.isnan(value) else f"{value:g}"


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def report_runs(results: Mapping[tuple[str, int], RunResult], methods: Sequence[str],
                seeds: Sequence[int]) -> tuple[list[Figure], list[bool]]:
    """Print the per-run and to-target tables and the two ASHA targets; returns the headline
    figures and the targets' verdicts."""
    print("\nPer run. start: seconds from the launch to the first trial's start (worker start-up); "
          "budget:\ntraining seconds from then on; epochs: trained within the budget, retrains "
          "included; s/ep:\nslot-seconds of segments per epoch; idle: share of slot time with no "
          "segment, within the\nbudget and over the whole run; peak: resume checkpoints on disk "
          "at once; paus: paused at\nthe end (RUNNING in Optuna).")
    print(f"{'method':<16} {'seed':>4} {'trials':>6} {'cmpl':>4} {'prun':>4} {'paus':>4} "
          f"{'fail':>4} {'start':>5} {'budget':>6} {'epochs':>6} {'s/ep':>5} {'best':>7} "
          f"{'idle':>5} {'idle-run':>8} {'peak MB':>7} {'files':>5}")
    for seed in seeds:
        for method in methods:
            r = results[(method, seed)]
            print(f"{method:<16} {seed:>4} {sum(r.counts.values()):>6} "
                  f"{r.counts.get('COMPLETE', 0):>4} {r.counts.get('PRUNED', 0):>4} "
                  f"{r.counts.get('RUNNING', 0):>4} {r.counts.get('FAIL', 0):>4} "
                  f"{r.startup:>5.1f} {r.window:>6.1f} {r.epochs:>6} "
                  f"{_fmt(r.seconds_per_epoch, 2):>5} {_fmt(final_best(r.events)):>7} "
                  f"{_fmt(r.idle_window, 2):>5} {r.idle_run:>8.2f} "
                  f"{r.peak_bytes / 1e6:>7.2f} {r.peak_files:>5}")
    print("\nEpochs (summed over all trials, in time order) and seconds (from the first trial's "
          "start) to\nreach random search's final best of the same seed")
    print(f"{'seed':>4} {'target':>7} {'method':<16} {'epochs':>7} {'seconds':>8} "
          f"{'random epochs':>13} {'ratio':>11}")
    hits: dict[str, list[int | None]] = {m: [] for m in methods}
    ratios: dict[str, list[float]] = {m: [] for m in methods}
    for seed in seeds:
        base = results[(BASELINE, seed)]
        target = final_best(base.events)
        own = None if target is None else epochs_to_reach(base.events, target)
        for method in methods:
            r = results[(method, seed)]
            hit = None if target is None else epochs_to_reach(r.events, target)
            hits[method].append(None if hit is None else hit[0])
            ratio = math.inf if hit is None or own is None else hit[0] / own[0]
            ratios[method].append(ratio)
            print(f"{seed:>4} {_fmt(target):>7} {method:<16} "
                  f"{'-' if hit is None else hit[0]:>7} "
                  f"{'-' if hit is None else f'{hit[1] - r.start:.1f}':>8} "
                  f"{'-' if own is None else own[0]:>13} {_ratio_text(ratio):>11}")
    print()
    figures: list[Figure] = []
    for method in methods:
        if method == BASELINE:
            continue
        values = ratios[method]
        median = statistics.median(values) if values else math.nan
        per_seed = ", ".join(_ratio_text(v) for v in values)
        print(f"{method} epochs / random epochs: median {_ratio_text(median)} over "
              f"{len(values)} seed(s) ({per_seed}); median epochs "
              f"{_epochs_text(median_epochs(hits[method]))}")
        asha = method.startswith("asha-")
        figures.append(Figure(
            f"{method}: epochs to reach random search's best ({len(values)} seeds)",
            "bench_promotion.py", f"ratios {per_seed}", "random search's own epochs",
            _ratio_text(median), f"<= {TARGET_RATIO:.2f}" if asha else "-",
            median <= TARGET_RATIO if asha else None))
    idle = {m: statistics.median(results[(m, s)].idle_window for s in seeds) for m in methods}
    peak = {m: max((results[(m, s)].peak_bytes, results[(m, s)].peak_files) for s in seeds)
            for m in methods}
    others = [m for m in methods if m != BASELINE]
    if others:
        figures.append(Figure(
            f"slot idle share within the budget (median of {len(seeds)} seeds)",
            "bench_promotion.py", ", ".join(f"{m} {_fmt(idle[m], 2)}" for m in others),
            f"random {_fmt(idle[BASELINE], 2)}", "-", "-", None))
        figures.append(Figure(
            f"peak resume checkpoints on disk (largest of {len(seeds)} seeds)",
            "bench_promotion.py",
            ", ".join(f"{m} {peak[m][0] / 1e6:.1f} MB ({peak[m][1]})" for m in others),
            f"random {peak[BASELINE][0] / 1e6:.1f} MB ({peak[BASELINE][1]})", "-", "-", None))
    verdicts: list[bool] = []
    for method in ("asha-stop", "asha-promotion"):
        if method in methods:
            median = statistics.median(ratios[method])
            ok = median <= TARGET_RATIO
            verdicts.append(ok)
            print(f"{_verdict(ok)}  {method} reaches random search's final best with <= 1/3 of "
                  f"its epochs (median ratio {_ratio_text(median)})")
    if {"asha-stop", "asha-promotion"} <= set(methods):
        promo, stop = median_epochs(hits["asha-promotion"]), median_epochs(hits["asha-stop"])
        ok = math.isfinite(promo) and promo <= stop  # neither reaching it shows nothing
        verdicts.append(ok)
        print(f"{_verdict(ok)}  promotion ASHA needs no more epochs than stopping ASHA (median "
              f"{_epochs_text(promo)} vs {_epochs_text(stop)} over {len(seeds)} seed(s))"
              + ("; neither reached it" if math.isinf(promo) and math.isinf(stop) else ""))
        figures.append(Figure(
            f"promotion vs stopping ASHA: median epochs to random's best ({len(seeds)} seeds)",
            "bench_promotion.py", _epochs_text(promo), f"{_epochs_text(stop)} stopping ASHA",
            _ratio_text(promo / stop) if stop and not math.isinf(stop) else "-",
            "<= 1.00", ok))
    return figures, verdicts


def report_round(outcomes: Mapping[bool, tuple[int, dict[str, int], dict[int, int], float]]
                 ) -> tuple[Figure, bool]:
    """Print the textbook round's lines; returns its figure and whether both counts are right."""
    low, high, eta = ROUND
    print(f"\nTextbook round through the launcher: sync_sh {low}..{high}, eta {eta}, "
          f"n_trials {ROUND_TRIALS}")
    ok = True
    for resume, (epochs, states, pruned_at, seconds) in sorted(outcomes.items(), reverse=True):
        right = round_as_expected(epochs, states, pruned_at, resume)
        ok = ok and right
        print(f"  resume {str(resume).lower():<5}: {epochs:>3} epochs (target "
              f"{ROUND_TARGET[resume]}), {seconds:5.1f} s, states {states}, pruned at "
              f"epoch: trials {pruned_at}  {_verdict(right)}")
    ok = ok and set(outcomes) == {True, False}
    with_, without = outcomes.get(True), outcomes.get(False)
    measured = "-" if with_ is None else f"{with_[0]} epochs, {with_[3]:.1f} s"
    baseline = "-" if without is None else f"{without[0]} epochs, {without[3]:.1f} s retrained"
    ratio = "-" if not (with_ and without and without[0]) else f"{with_[0] / without[0]:.2f}"
    print(f"{_verdict(ok)}  one round trains {ROUND_TARGET[True]} epochs with resume and "
          f"{ROUND_TARGET[False]} without")
    return Figure(f"sync SH round {low}..{high} eta {eta}, 8 configurations", "bench_promotion.py",
                  measured, baseline, ratio, f"{ROUND_TARGET[True]} vs {ROUND_TARGET[False]}",
                  ok), ok


def report_checkpoint(ours: CheckpointCost, full: CheckpointCost) -> tuple[Figure, bool]:
    """Print the checkpoint's cost; returns its figure and whether it is under the target."""
    print(f"\nResume checkpoint of LeNet ({ours.bytes / 1e3:.0f} kB), medians: save "
          f"{ours.save * 1e3:.1f} ms, load {ours.load * 1e3:.1f} ms; one epoch of this benchmark "
          f"(limit_train_batches {LIMIT_TRAIN_BATCHES}, batch 128) {ours.epoch:.3f} s: "
          f"{100 * ours.fraction:.1f}%")
    print(f"  context: a full digits epoch {full.epoch:.3f} s, save {full.save * 1e3:.1f} ms + "
          f"load {full.load * 1e3:.1f} ms = {100 * full.fraction:.1f}% of it")
    ok = ours.fraction < TARGET_CHECKPOINT
    print(f"{_verdict(ok)}  save + load under {100 * TARGET_CHECKPOINT:.0f}% of an epoch "
          f"({100 * ours.fraction:.1f}%)")
    return Figure("resume checkpoint save + load, LeNet", "bench_promotion.py",
                  f"{(ours.save + ours.load) * 1e3:.1f} ms",
                  f"{ours.epoch:.3f} s epoch (full digits epoch: {100 * full.fraction:.1f}%)",
                  f"{100 * ours.fraction:.1f}%", f"< {100 * TARGET_CHECKPOINT:.0f}%", ok), ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: python benchmarks/bench_promotion.py --seeds 0 1 2 --budget 30",
    )
    parser.add_argument("--budget", type=float, default=None,
                        help="training seconds per run, from its first trial's start "
                             "(default 30; 15 with --quick)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help="sampler seeds (default 0 1 2; 0 with --quick)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=None,
                        help="methods (default all five; random and asha-promotion with "
                             "--quick); random is the baseline and always runs")
    parser.add_argument("--workers", type=int, default=2, help="CPU slots (default 2)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench_promotion"),
                        help="folder for the journal files (default runs/bench_promotion)")
    parser.add_argument("--no-round", action="store_true",
                        help="skip the textbook round (34 vs 58 epochs)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: random and promotion ASHA, seed 0, 15 s per run, "
                             "the round and the checkpoint")
    parser.add_argument("--json", metavar="PATH", help="also write the figures for run_all.py")
    parser.add_argument("--analyze-only", action="store_true",
                        help="do not run studies: analyse the journal files already in --out")
    args = parser.parse_args(argv)
    budget = args.budget or (15.0 if args.quick else 30.0)
    seeds = args.seeds or ([0] if args.quick else [0, 1, 2])
    chosen = args.methods or (QUICK_METHODS if args.quick else METHODS)
    methods = [BASELINE, *[m for m in METHODS if m in chosen and m != BASELINE]]
    if budget <= 0 or args.workers < 1:
        parser.error("--budget and --workers must be positive")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print(machine_line())
    print(f"LeNet on digits, epoch = {LIMIT_TRAIN_BATCHES} of the training set, <= "
          f"{MAX_RESOURCE} epochs, rungs {MIN_RESOURCE}..{MAX_RESOURCE} eta {REDUCTION_FACTOR}, "
          f"{args.workers} CPU workers x 1 thread, {budget:g} s per run, seeds {seeds}")
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.analyze_only:
        _warm_up()
    results: dict[tuple[str, int], RunResult] = {}
    rounds: dict[bool, tuple[int, dict[str, int], dict[int, int], float]] = {}
    run_dir = Path(tempfile.mkdtemp(prefix="bench-promotion-"))
    log = io.StringIO()

    def journal_of(name: str) -> Path:
        journal = args.out / f"{name}.journal"
        if not args.analyze_only:  # a fresh study: the old journal and its lock files go
            for stale in (journal, *args.out.glob(f"{journal.name}.*lock")):
                stale.unlink(missing_ok=True)
        return journal

    try:
        for seed in seeds:
            for method in methods:
                journal = journal_of(study_name(method, seed))
                if not args.analyze_only:
                    raw = build_config(method, seed, budget, str(journal), str(run_dir),
                                       args.workers)
                    info = run_study(raw, budget, log).user_attrs[BENCH_ATTR]
                    print(f"# {study_name(method, seed)}: {info['wall']:.1f} s", file=sys.stderr,
                          flush=True)
                trials, info = load_run(str(journal), study_name(method, seed))
                results[(method, seed)] = analyze(method, seed, trials, info)
        if not args.no_round:
            for resume in (True, False):
                name = f"round-{'resume' if resume else 'scratch'}"
                journal = journal_of(name)
                if not args.analyze_only:
                    run_study(round_config(resume, str(journal), str(run_dir), args.workers),
                              log=log)
                trials, info = load_run(str(journal), name)
                rounds[resume] = (*round_outcome(trials), float(info["wall"]))
                print(f"# {name}: {info['wall']:.1f} s", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    for r in results.values():
        for reason in sorted(set(r.fail_reasons))[:3]:
            print(f"note: {study_name(r.method, r.seed)} failed trial: {reason[:200]}")
    figures, verdicts = report_runs(results, methods, seeds)
    if rounds:
        figure, ok = report_round(rounds)
        figures.append(figure)
        verdicts.append(ok)
    figure, ok = report_checkpoint(measure_checkpoint(LIMIT_TRAIN_BATCHES),
                                   measure_checkpoint(1.0, epochs=2, resumes=2))
    figures.append(figure)
    verdicts.append(ok)
    write_figures(args.json, figures)
    print(f"\n{sum(verdicts)} of {len(verdicts)} targets met")
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
