"""Several objectives: hypervolume against epochs and wall-clock, MO-ASHA vs random search and
Syne Tune's MOASHA.

The task of ``configs/lenet_error_vs_size.yaml``: LeNet on scikit-learn's digits, two objectives
both minimised, ``validation_error`` and ``parameters`` (LeNet's ``width`` sets the count), the
space lr loguniform [0.01, 1], momentum uniform [0, 0.9], width loguniform [0.1, 2], at most 9
epochs a trial, 2 workers (one CPU slot each, one torch thread). Methods, each run on the same
seeds:

* ``random``: random search, ``pruner: none`` (every trial trains 9 epochs), the baseline;
* ``moasha-stop``: our MO-ASHA, stopping type (``pruner: {name: asha, mode: stop}``, rungs 1, 3,
  9, ``reduction_factor`` 3: the pruner ranks a rung by Pareto order);
* ``moasha-promotion``: our MO-ASHA, promotion type (``mode: promotion``), the same rungs;
* ``syne-tune``: Syne Tune 0.16's ``MOASHA`` (``peers/syne_tune_moasha.py``: ``Tuner``,
  ``LocalBackend``, the same rungs, its default non-dominated-sort priority and 5-second
  polling; each trial a process of ``peers/syne_tune_train_mo.py`` training the same LeNet on
  the same data). Only when Syne Tune imports from this benchmark's folder
  (``--install-syne-tune`` puts it in ``benchmarks/.peers/syne/``, as ``bench_peers.py`` does)
  or the environment; otherwise its rows say so and the rest runs. Never a test dependency.

**The same configurations.** Per seed, ``RandomSampler(seed)`` draws one list of
configurations; every method trains them in that order (our launcher's ``initial:``, Syne
Tune's scheduler suggesting them one by one), so the methods differ only in what they stop,
pause and promote. **The same budget**: ``--trials`` times 9 epochs (random search's
``--trials`` full trials), summed over all trials; our runs stop once that many epochs are
reported (the launcher's ``Supervisor`` with ``bench_search.stop_after_epochs``), Syne Tune's
at ``StoppingCriterion(max_num_evaluations=...)``, and every stream is cut at exactly that many
epochs. Each run is a fresh process (our launcher through this script's ``--launch``); its
wall-clock counts from just before that process started, imports included, for every system.

**Hypervolume.** A point is one trial's values at one epoch (every epoch's, not only final
values: a stopped trial's epoch 3 counts, as in ``lightning_hpo.report.hypervolume_frame``).
The epochs of all trials form one stream in the order they ended; the hypervolume after *k*
epochs is that of the first *k* points, and against wall-clock that of the points ended by then.
The reference point is fixed, the same for every method and seed: (1.0, the parameters of
``LeNet(width=2.0)``), the worst error and the largest model of the space; hypervolumes are
printed as a share of the box [0, 1] x [0, that count] (a constant scaling).

**Figures**, per method and seed, then the median over seeds: final hypervolume, epochs
trained, wall-clock, and the epochs and seconds to reach random search's final hypervolume of
the same seed (random search's own: when it first reached it); the hypervolume at 1/9, 1/3,
2/3 and all of the budget, and at fixed seconds. Targets (issue 26), each a median over seeds
of per-seed ratios against a baseline of the same run:

* MO-ASHA (stopping and promotion, each) reaches random search's final hypervolume in at most
  1/3 of random search's epochs to it (a seed that never reaches it counts as infinite);
* MO-ASHA is at least as fast as Syne Tune's MOASHA in wall-clock to the same hypervolume: the
  highest both reached in that seed (the lower of their two finals); ratio <= 1.

Besides, with Syne Tune installed, ``peers/syne_tune_moasha.py --check`` shows its MOASHA's
decision at a rung holding (0.5, 0.5), (0.6, 0.6), (0.7, 0.7) for a new (0.1, 0.1) (eta 3,
both minimised): STOP for a result that dominates every other, where
``lightning_hpo.pareto.pareto_order`` ranks it first. Its decisions are compared with, never
taken as the reference.

**Replay on measured curves** (``--replay [SEEDS]``, as ``bench_schedules.py`` for one
objective: 3 seeds cannot tell luck from the algorithm). ``--tabulate N`` measures N random
configurations of this problem once, through the launcher (``pruner: none``, every
configuration to epoch 27, an epoch a quarter of the training set, 2 CPU slots): each one's
validation error per epoch and parameter count, seconds per epoch, the trial start and a
resume checkpoint's cost, stored in ``benchmarks/data/lenet_digits_mo_curves.json`` (in git).
The replay runs ``bench_schedules.simulate`` (its clock, slots and draws: trial k of every
method trains the seed's k-th configuration) with rungs 1, 3, 9, 27 and every decision taken
by the library: random search and stopping MO-ASHA under ``StopSchedule``, stopping MO-ASHA's
decision at each rung by ``ASHAPruner.prune`` on an in-memory two-objective Optuna study
(:class:`PrunerStop`), promotion MO-ASHA by ``PromotionASHA(minimize=(True, True))`` and
synchronous SH by ``SyncSuccessiveHalving(minimize=(True, True))`` over the pairs (validation
error, parameters), Pareto fronts and all. Per seed (100 by default), 2 slots, the budget the
simulated time random search needs for 64 configurations: the hypervolume of every pair reported
so far against epochs trained and simulated seconds (the same reference point), and the epochs until
each method first reaches random search's final hypervolume over random search's own; the
target is the median ratio <= 1/3. Syne Tune has no replay: its target needs the launcher mode.

    python benchmarks/bench_multiobjective.py                 # seeds 0 1 2, 12 trials' epochs
    python benchmarks/bench_multiobjective.py --install-syne-tune   # Syne Tune in its folder
    python benchmarks/bench_multiobjective.py --smoke         # seed 0, 3 trials' epochs
    python benchmarks/bench_multiobjective.py --no-syne-tune --seeds 0 1 2 3 4 --trials 30
    python benchmarks/bench_multiobjective.py --syne-sleep-time 0.5   # Syne Tune polling faster
    python benchmarks/bench_multiobjective.py --replay         # 100 seeds on the table (~7 min)
    python benchmarks/bench_multiobjective.py --tabulate 300   # measure the table (~5 min)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from _record import Figure, machine_line, write_figures
from bench_schedules import Table

from lightning_hpo.pareto import pareto_order
from lightning_hpo.report.fronts import HypervolumeTrace
from lightning_hpo.schema import ATTR, objective_curve

HERE = Path(__file__).resolve().parent
PEERS = HERE / "peers"
SYNE_SITE = HERE / ".peers" / "syne"  # where bench_peers.py installs Syne Tune too
METHODS = ("random", "moasha-stop", "moasha-promotion", "syne-tune")
OURS = METHODS[:3]
ASHA = ("moasha-stop", "moasha-promotion")
BASELINE, PEER = "random", "syne-tune"
LABELS = {"random": "random search", "moasha-stop": "MO-ASHA stop",
          "moasha-promotion": "MO-ASHA promotion", "syne-tune": "Syne Tune MOASHA"}
METRICS = ("validation_error", "parameters")
MINIMIZE = (True, True)
MAX_EPOCHS, REDUCTION_FACTOR, WORKERS = 9, 3, 2
SPACE = {
    "lr": {"loguniform": [0.01, 1.0]},
    "momentum": {"uniform": [0.0, 0.9]},
    "width": {"loguniform": [0.1, 2.0]},
}
DISTRIBUTIONS = {
    "lr": optuna.distributions.FloatDistribution(0.01, 1.0, log=True),
    "momentum": optuna.distributions.FloatDistribution(0.0, 0.9),
    "width": optuna.distributions.FloatDistribution(0.1, 2.0, log=True),
}
TARGET_EPOCHS, TARGET_WALL = 1 / 3, 1.0
DEFAULT_TRIALS, SMOKE_TRIALS = 12, 3
FRACTIONS = (1 / 9, 1 / 3, 2 / 3, 1.0)
SECONDS = (15, 30, 45, 60, 90, 120, 180, 240, 300, 420, 600)
WALL_CAP = 1800.0  # the launcher's own wall-clock stop: a safety net only
INSTALL_HINT = "python benchmarks/bench_multiobjective.py --install-syne-tune"
#: Syne Tune and what it needs beyond this project's environment (bench_peers.py's list).
SYNE_TUNE = ["syne-tune==0.16.0", "dill", "sortedcontainers", "psutil", "statsmodels", "patsy",
             "formulaic", "interface-meta", "wrapt", "xgboost"]


def lenet_parameters(width: float) -> int:
    """LeNet's parameter count at ``width`` (10 classes), what it logs as ``parameters``.

    Example::

        >>> lenet_parameters(1.0)
        61706
    """
    from lightning_hpo.builtin.models import LeNet

    return sum(p.numel() for p in LeNet(width=width).parameters())


def reference() -> tuple[float, float]:
    """The fixed reference point: the worst error, and the largest model of the space."""
    return (1.0, float(lenet_parameters(DISTRIBUTIONS["width"].high)))


def configurations(seed: int, n: int) -> list[dict[str, float]]:
    """The ``n`` configurations every method trains in seed ``seed``, in order.

    Example::

        >>> a, b = configurations(0, 3), configurations(0, 5)
        >>> a == b[:3], sorted(a[0]), a != configurations(1, 3)
        (True, ['lr', 'momentum', 'width'], True)
    """
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    configs = []
    for _ in range(n):
        trial = study.ask(DISTRIBUTIONS)
        configs.append(dict(trial.params))
        study.tell(trial, 0.0)
    return configs


# -- the pure part: epochs -> one stream -> hypervolume by epoch ------------------------------


@dataclass(frozen=True)
class EpochPoint:
    """One epoch a trial trained: when it ended (unix s), which, and its values."""

    time: float
    trial: int
    epoch: int
    values: tuple[float, ...]


def stream(points: Iterable[EpochPoint], epochs: int | None = None) -> list[EpochPoint]:
    """The epochs in the order they ended (ties by trial, epoch), the first ``epochs`` only."""
    ordered = sorted(points, key=lambda p: (p.time, p.trial, p.epoch))
    return ordered if epochs is None else ordered[:epochs]


def study_points(trials: Iterable[Any]) -> list[EpochPoint]:
    """Every epoch of a launcher study: each trial's values per epoch
    (:func:`lightning_hpo.schema.objective_curve`) at its ``epoch_end_times``; an epoch
    without an end time (a trial stopped before it was written) is left out.

    Example::

        >>> class T:
        ...     number = 4
        ...     user_attrs = {"objective_values": [[1, 0.5, 100], [2, 0.4, 100]],
        ...                   "epoch_end_times": [10.0, 11.5]}
        >>> [(p.time, p.epoch, p.values) for p in study_points([T()])]
        [(10.0, 1, (0.5, 100.0)), (11.5, 2, (0.4, 100.0))]
    """
    out = []
    for trial in trials:
        times = trial.user_attrs.get(ATTR.EPOCH_END_TIMES) or []
        for epoch, values in objective_curve(trial).items():
            if epoch <= len(times) and times[epoch - 1] is not None:
                out.append(EpochPoint(float(times[epoch - 1]), trial.number, epoch, values))
    return out


def syne_points(record: dict[str, Any]) -> list[EpochPoint]:
    """Every epoch the Syne Tune trials logged (``syne_tune_moasha.py --times``).

    Example::

        >>> rec = {"trials": [{"trial": 0, "epochs": [
        ...     {"epoch": 1, "time": 3.0, "validation_error": 0.2, "parameters": 50.0}]}]}
        >>> syne_points(rec)
        [EpochPoint(time=3.0, trial=0, epoch=1, values=(0.2, 50.0))]
    """
    return [EpochPoint(float(e["time"]), int(t["trial"]), int(e["epoch"]),
                       tuple(float(e[m]) for m in METRICS))
            for t in record["trials"] for e in t["epochs"]]


def hypervolume_curve(points: Sequence[EpochPoint], ref: Sequence[float]) -> list[float]:
    """The hypervolume of the first k points of a stream, for k = 1..len: it never decreases.

    Example::

        >>> pts = [EpochPoint(1.0, 0, 1, (0.5, 2.0)), EpochPoint(2.0, 1, 1, (0.9, 1.0)),
        ...        EpochPoint(3.0, 0, 2, (0.6, 3.0))]
        >>> hypervolume_curve(pts, (1.0, 4.0))
        [1.0, 1.1, 1.1]
    """
    trace = HypervolumeTrace(ref, MINIMIZE)
    curve = []
    for point in points:
        trace.add(point.values)
        curve.append(round(trace.value, 12))
    return curve


def reach(curve: Sequence[float], times: Sequence[float], target: float,
          start: float) -> tuple[int, float] | None:
    """The epochs, and the seconds from ``start``, until the curve first reached ``target``
    (a relative 1e-9 below it counts); None when it never did.

    Example::

        >>> reach([0.1, 0.3, 0.3, 0.5], [11.0, 12.0, 13.0, 14.0], 0.3, start=10.0)
        (2, 2.0)
        >>> reach([0.1, 0.3], [11.0, 12.0], 0.4, start=10.0) is None
        True
    """
    for k, value in enumerate(curve):
        if value >= target * (1 - 1e-9):
            return k + 1, times[k] - start
    return None


def value_at(curve: Sequence[float], times: Sequence[float], start: float,
             epochs: int | None = None, seconds: float | None = None) -> float:
    """The hypervolume after ``epochs`` epochs, or at ``seconds`` from ``start`` (0 before the
    first epoch).

    Example::

        >>> value_at([0.1, 0.3], [11.0, 12.0], 10.0, epochs=1), value_at([0.1, 0.3],
        ...          [11.0, 12.0], 10.0, seconds=5.0)
        (0.1, 0.3)
    """
    if epochs is not None:
        return curve[min(epochs, len(curve)) - 1] if epochs > 0 and curve else 0.0
    assert seconds is not None
    done = [v for v, t in zip(curve, times, strict=True) if t - start <= seconds]
    return done[-1] if done else 0.0


@dataclass
class RunResult:
    """One (method, seed) run: when its process started (unix s), its wall seconds, its
    epoch stream (cut at the budget) and the hypervolume after each of those epochs."""

    method: str
    seed: int
    start: float
    wall: float
    points: list[EpochPoint]
    curve: list[float]
    trials: int

    @property
    def epochs(self) -> int:
        return len(self.points)

    @property
    def final(self) -> float:
        return self.curve[-1] if self.curve else 0.0

    @property
    def times(self) -> list[float]:
        return [p.time for p in self.points]

    def reach(self, target: float) -> tuple[int, float] | None:
        return reach(self.curve, self.times, target, self.start)


def result_of(method: str, seed: int, start: float, wall: float,
              points: Iterable[EpochPoint], epochs: int, ref: Sequence[float]) -> RunResult:
    """A run's result: its points as one stream cut at ``epochs``, and their hypervolume."""
    cut = stream(points, epochs)
    return RunResult(method, seed, start, wall, cut, hypervolume_curve(cut, ref),
                     len({p.trial for p in cut}))


# -- running -------------------------------------------------------------------------------


def build_config(method: str, seed: int, configs: list[dict[str, float]], storage: str,
                 run_dir: str, workers: int = WORKERS) -> dict[str, Any]:
    """The launcher config of one of our methods, as the raw mapping: the task of
    ``configs/lenet_error_vs_size.yaml`` with the given configurations as ``initial``."""
    trainer: dict[str, Any] = {}
    pruner: Any = "none"
    if method == "random":
        trainer["max_epochs"] = MAX_EPOCHS
    elif method in ASHA:
        pruner = {"name": "asha", "mode": method.removeprefix("moasha-"), "min_resource": 1,
                  "max_resource": MAX_EPOCHS, "reduction_factor": REDUCTION_FACTOR}
    else:
        raise ValueError(f"method is {method!r}; allowed: {', '.join(OURS)}")
    return {
        "study": f"{method}-seed{seed}", "storage": storage, "run_dir": run_dir,
        "model": {"name": "lenet"}, "data": {"name": "digits"},
        "metric": list(METRICS), "direction": ["minimize", "minimize"],
        "space": SPACE, "initial": configs, "sampler": {"name": "random", "seed": seed},
        "pruner": pruner, "trainer": trainer,
        "devices": {"accelerator": "cpu", "count": workers, "per_trial": 1,
                    "trials_per_device": 1},
        "stop": {"n_trials": len(configs), "max_wallclock_time": WALL_CAP},
    }


def launch(config: Path, epochs: int) -> None:
    """``--launch``: run one study from its config (JSON) until ``epochs`` epochs are
    reported, in this (fresh) process."""
    from bench_search import run_study

    run_study(json.loads(config.read_text()), epochs)


def run_ours(method: str, seed: int, configs: list[dict[str, float]], epochs: int,
             root: Path, ref: Sequence[float]) -> RunResult:
    """One of our methods through the launcher, in a fresh process (``--launch``)."""
    journal = root / f"{method}-seed{seed}.journal"
    raw = build_config(method, seed, configs, str(journal), str(root / "runs"))
    path = root / f"{method}-seed{seed}.json"
    path.write_text(json.dumps(raw))
    log = root / f"{method}-seed{seed}.log"
    start = time.time()
    with open(log, "w") as out:
        done = subprocess.run([sys.executable, __file__, "--launch", str(path),
                               "--epochs-total", str(epochs)], stdout=out, stderr=out,
                              cwd=root)
    wall = time.time() - start
    if done.returncode != 0:
        raise SystemExit(f"{method} seed {seed} failed ({done.returncode}):\n"
                         f"{log.read_text()[-2000:]}")
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(journal)))
    trials = optuna.load_study(study_name=raw["study"], storage=storage).get_trials(
        deepcopy=False)
    return result_of(method, seed, start, wall, study_points(trials), epochs, ref)


def syne_env() -> dict[str, str]:
    """The environment of the Syne Tune process: its folder and the peers' on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(SYNE_SITE), str(PEERS), *filter(None, [env.get("PYTHONPATH")])])
    return env


def syne_tune_found(install: bool) -> bool:
    """Whether Syne Tune imports where the peer runs (installed into :data:`SYNE_SITE` first
    when ``install``: pip, the registry, ``--no-deps`` so that this environment's numpy,
    pandas and scikit-learn stay the ones used)."""
    if install and not (SYNE_SITE / "syne_tune").is_dir():
        print(f"installing {SYNE_TUNE[0]} into {SYNE_SITE} (the benchmark's own folder)")
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--target", str(SYNE_SITE), *SYNE_TUNE], check=True)
    probe = subprocess.run([sys.executable, "-c", "import syne_tune"], env=syne_env(),
                           capture_output=True)
    return probe.returncode == 0


def run_syne_tune(seed: int, configs: list[dict[str, float]], epochs: int, root: Path,
                  ref: Sequence[float], sleep_time: float = 5.0) -> RunResult:
    """Syne Tune's MOASHA on the same configurations (``peers/syne_tune_moasha.py``)."""
    (root / f"configs-seed{seed}.json").write_text(json.dumps(configs))
    times = root / f"syne-seed{seed}.json"
    start = time.time()
    done = subprocess.run(
        [sys.executable, str(PEERS / "syne_tune_moasha.py"),
         "--configs", str(root / f"configs-seed{seed}.json"), "--epochs", str(MAX_EPOCHS),
         "--max-epochs-total", str(epochs), "--workers", str(WORKERS), "--seed", str(seed),
         "--sleep-time", str(sleep_time),
         "--run-dir", str(root / f"syne-runs-seed{seed}"), "--times", str(times)],
        cwd=root, env=syne_env(), capture_output=True, text=True)
    wall = time.time() - start
    if done.returncode != 0:
        raise SystemExit(f"Syne Tune failed ({done.returncode}):\n{done.stderr[-2000:]}")
    record = json.loads(times.read_text())
    return result_of(PEER, seed, start, wall, syne_points(record), epochs, ref)


def syne_tune_check() -> dict[str, Any]:
    """Syne Tune's MOASHA decision at the example rung (``syne_tune_moasha.py --check``), and
    our order of the same points."""
    done = subprocess.run([sys.executable, str(PEERS / "syne_tune_moasha.py"), "--check"],
                          env=syne_env(), capture_output=True, text=True, check=True)
    record = json.loads(done.stdout.strip().splitlines()[-1])
    points = {k: tuple(p) for k, p in enumerate([*record["rung"], record["new"]])}
    record["ours"] = pareto_order(points, MINIMIZE)
    return record


# -- the measured table (--tabulate) and its replay (--replay) ------------------------------


#: The replay's problem: this script's space at 27 epochs (rungs 1, 3, 9, 27), an epoch a quarter
#: of the training set (``bench_schedules.py``'s epoch).
TABLE_EPOCHS = 27
TABLE = HERE / "data" / "lenet_digits_mo_curves.json"
TABULATE_WALL = 660.0  # --tabulate's launcher stop: the trials still running are left out


def tabulate(n: int, out: Path, workers: int = WORKERS, seed: int = 2000,
             wall: float = TABULATE_WALL) -> Any:
    """Train ``n`` configurations of this script's problem to epoch :data:`TABLE_EPOCHS`
    through the launcher (random search, ``pruner: none``, an epoch a quarter of the training
    set, ``workers`` CPU slots), as ``bench_schedules.tabulate`` does: each configuration's
    validation error per epoch and parameter count (its ``objective_values``), its median
    seconds per epoch, the median trial start and a resume checkpoint's save plus load.
    Trials that did not complete (the launcher stops ``wall`` seconds in) are left out and
    counted in the table's ``problem`` line."""
    from bench_promotion import LIMIT_TRAIN_BATCHES, measure_checkpoint, run_study
    from bench_schedules import timing_columns
    from optuna.trial import TrialState

    curves: list[list[float]] = []
    counts: list[int] = []
    with tempfile.TemporaryDirectory(prefix="bench-mo-table-") as tmp:
        raw = build_config("random", seed, [], f"{tmp}/table.journal", tmp, workers)
        raw["study"], raw["initial"] = "table", []
        raw["trainer"] = {"max_epochs": TABLE_EPOCHS, "limit_train_batches": LIMIT_TRAIN_BATCHES}
        raw["stop"] = {"n_trials": n, "max_wallclock_time": wall}
        started = time.time()
        study = run_study(raw)
        print(f"tabulated {n} trials in {time.time() - started:.0f} s", flush=True)
        complete = []
        for trial in study.get_trials(deepcopy=False):
            curve = objective_curve(trial)
            if trial.state == TrialState.COMPLETE and sorted(curve) == list(
                    range(1, TABLE_EPOCHS + 1)):
                complete.append((trial, curve))
        complete.sort(key=lambda tc: tc[0].number)
        for _, curve in complete:
            curves.append([round(curve[e][0], 6) for e in range(1, TABLE_EPOCHS + 1)])
            counts.append(int(curve[1][1]))
        params, seconds, start = timing_columns([trial for trial, _ in complete])
    cost = measure_checkpoint(LIMIT_TRAIN_BATCHES)
    problem = (f"LeNet on digits, objectives validation_error and parameters, epoch = "
               f"{LIMIT_TRAIN_BATCHES} of the training set, {TABLE_EPOCHS} epochs, "
               f"bench_multiobjective.SPACE; random search through the launcher on {workers} "
               f"CPU slots x 1 thread, sampler seed {seed}; {len(complete)} of {n} trials "
               "complete")
    table = MOTable(problem, machine_line(), params, {"validation_error": curves}, seconds,
                    start, round(cost.save + cost.load, 5),
                    cost.bytes, counts)
    table.save(out)
    return table


@dataclass(frozen=True)
class MOTable(Table):
    """``bench_schedules.Table`` with each configuration's parameter count: ``curves`` holds
    ``validation_error`` only (the count is the same every epoch)."""

    parameters: list[int]

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.parameters) != len(self.params):
            raise ValueError("parameters must have one entry a configuration")


#: The replay's methods: the library's schedule for each (``sync-sh``: synchronous successive
#: halving with resume, for context).
REPLAY_METHODS = ("random", "moasha-stop", "moasha-promotion", "sync-sh")
REPLAY_LABELS = {**LABELS, "sync-sh": "sync SH"}
#: ``lenet_parameters(2.0)``, the reference point's count (a test checks it), so that the
#: replay needs no torch.
LARGEST = 244_362
REPLAY_REFERENCE = (1.0, float(LARGEST))
REPLAY_SEEDS = 100
#: The largest ``--min-resource`` that leaves a rung below the table's 27 epochs (eta 3).
MAX_REPLAY_MIN_RESOURCE = 9


def rung_ladder(min_resource: int, max_resource: int) -> list[int]:
    """The replay's rungs: ``min_resource * 3**k`` up to ``max_resource``, which ends them.

    Example::

        >>> rung_ladder(1, 27), rung_ladder(3, 27)
        ([1, 3, 9, 27], [3, 9, 27])
    """
    from lightning_hpo.pruners.rungs import rung_levels

    return rung_levels(min_resource, max_resource=max_resource,
                       reduction_factor=REDUCTION_FACTOR)
REPLAY_FRACTIONS = (1 / 9, 1 / 3, 2 / 3, 1.0)


class PrunerStop:
    """Stopping MO-ASHA's decision at a rung, by the library's own pruner: ``ASHAPruner.prune``
    (``lightning_hpo.pruners._asha._pareto_continues``: the trial's place in
    :func:`lightning_hpo.pareto.pareto_order` over the rung's records, then
    :func:`lightning_hpo.pruners.asha_continues`) on an in-memory Optuna study with two
    minimised objectives, where simulated trial k is Optuna trial k and each report writes the
    trial's ``objective_values`` as the ``PruningCallback`` does. ``log`` keeps every decision
    (trial, epoch, values, continues), in order.

    Example::

        >>> stop = PrunerStop(max_resource=27)
        >>> [stop(k, 1, v) for k, v in enumerate([(0.5, 9.0), (0.6, 9.5), (0.4, 8.0),
        ...                                         (0.7, 9.9)])]
        [True, False, True, False]
    """

    def __init__(self, max_resource: int, min_resource: int = 1,
                 reduction_factor: int = REDUCTION_FACTOR) -> None:
        from lightning_hpo.pruners import ASHAPruner

        self.pruner = ASHAPruner(min_resource, max_resource=max_resource,
                                 reduction_factor=reduction_factor)
        self.study = optuna.create_study(directions=["minimize", "minimize"],
                                         storage=optuna.storages.InMemoryStorage())
        self._storage = self.study._storage
        self._ids: list[int] = []
        self._rows: dict[int, list[list[float]]] = {}
        self.log: list[tuple[int, int, tuple[float, ...], bool]] = []

    def __call__(self, trial: int, epoch: int, values: tuple[float, ...]) -> bool:
        while len(self._ids) <= trial:  # Optuna numbers trials in the order they are asked
            self._ids.append(self.study.ask()._trial_id)
        trial_id = self._ids[trial]
        rows = self._rows.setdefault(trial, [])
        rows.append([epoch, *values])
        self._storage.set_trial_user_attr(trial_id, ATTR.OBJECTIVE_VALUES, rows)
        keep = not self.pruner.prune(self.study, self._storage.get_trial(trial_id))
        self.log.append((trial, epoch, tuple(values), keep))
        return keep


def replay_schedule(method: str, max_resource: int, min_resource: int = 1) -> Any:
    """The library's schedule of a replayed method (both objectives minimised), its rungs from
    ``min_resource`` epochs."""
    from lightning_hpo.schedules import PromotionASHA, StopSchedule, SyncSuccessiveHalving

    if method in ("random", "moasha-stop"):
        return StopSchedule(max_resource)
    if method == "moasha-promotion":
        return PromotionASHA(min_resource, max_resource, REDUCTION_FACTOR, minimize=MINIMIZE)
    if method == "sync-sh":
        return SyncSuccessiveHalving(min_resource, max_resource, REDUCTION_FACTOR,
                                     minimize=MINIMIZE)
    raise ValueError(f"method is {method!r}; allowed: {', '.join(REPLAY_METHODS)}")


@dataclass
class Replay:
    """One replayed (method, seed) run: the simulator's run (``run.events``: every epoch trained
    in simulated time order, a value pair or NaN for a retrained epoch), and the hypervolume of
    every pair reported so far after each of those epochs (a share of the reference box)."""

    run: Any  # bench_schedules.SimRun
    curve: list[float]
    stopper: PrunerStop | None = None

    @property
    def epochs(self) -> int:
        return len(self.curve)

    @property
    def final(self) -> float:
        return self.curve[-1] if self.curve else 0.0

    @property
    def times(self) -> list[float]:
        return [e.time for e in self.run.events]

    def reach(self, target: float) -> tuple[int, float] | None:
        return reach(self.curve, self.times, target, 0.0)


def replay(table: MOTable, method: str, seed: int, budget: float, slots: int = WORKERS,
           gap: float | None = None, ref: Sequence[float] = REPLAY_REFERENCE,
           min_resource: int = 1) -> Replay:
    """Replay ``method`` on the measured table with ``bench_schedules.simulate`` (its clock,
    slots and draws: trial k of every method trains the seed's k-th configuration); each
    epoch reports the pair (validation error, parameters) of its configuration."""
    from bench_schedules import GAP_SECONDS, simulate

    errors = table.values("validation_error")

    def value_of(config: int, epoch: int) -> tuple[float, float]:
        return (errors[config][epoch - 1], float(table.parameters[config]))

    stopper = (PrunerStop(table.max_epochs, min_resource) if method == "moasha-stop"
               else None)
    run = simulate(table, method, seed, budget, slots, gap=GAP_SECONDS if gap is None else gap,
                   schedule=replay_schedule(method, table.max_epochs, min_resource),
                   value_of=value_of,
                   continues=stopper)
    trace = HypervolumeTrace(ref, MINIMIZE)
    area = math.prod(ref)
    curve = []
    for event in run.events:
        if isinstance(event.value, tuple):
            trace.add(event.value)
        curve.append(round(trace.value / area, 12))
    return Replay(run, curve, stopper)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties).

    Example::

        >>> spearman([1, 2, 3, 4], [10, 20, 30, 25]), spearman([1, 2, 3], [3, 2, 1])
        (0.8, -1.0)
    """
    def ranks(values: Sequence[float]) -> list[float]:
        order = sorted(range(len(values)), key=lambda i: values[i])
        out = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2 + 1
            i = j + 1
        return out

    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    var = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return cov / var if var else math.nan


def describe(table: MOTable, ref: Sequence[float] = REPLAY_REFERENCE) -> list[str]:
    """What the table holds: the parameter range, the errors, how well an early rung predicts
    the last (Spearman), and the hypervolume of every pair of the table (the most any method
    can reach)."""
    errors = table.values("validation_error")
    last = [c[-1] for c in errors]
    rungs = [e for e in (1, 3, 9) if e < table.max_epochs]
    rho = ", ".join(f"epoch {e} {spearman([c[e - 1] for c in errors], last):.2f}"
                    for e in rungs)
    counts = sorted(table.parameters)
    everything = hypervolume_curve(
        [EpochPoint(0.0, c, e + 1, (v, float(table.parameters[c])))
         for c, curve in enumerate(errors) for e, v in enumerate(curve)], ref)[-1]
    finals = hypervolume_curve([EpochPoint(0.0, c, 0, (v, float(table.parameters[c])))
                                for c, v in enumerate(last)], ref)[-1]
    area = math.prod(ref)
    return [
        f"parameters {counts[0]:,} .. {counts[-1]:,} (median {statistics.median(counts):,.0f});"
        f" validation error at epoch {table.max_epochs}: min {min(last):.4f}, median "
        f"{statistics.median(last):.4f}, max {max(last):.4f}",
        f"Spearman of a configuration's error at {rho} with its error at epoch "
        f"{table.max_epochs}",
        f"hypervolume of the whole table: every epoch's pair {everything / area:.5f}, the final "
        f"epochs' only {finals / area:.5f} (share of the reference box {tuple(ref)})",
    ]


@dataclass(frozen=True)
class ReplaySeed:
    """One seed: random search's final hypervolume (the target) and each method's epochs and
    simulated seconds to it (None: never)."""

    seed: int
    target: float
    epochs: dict[str, int | None]
    seconds: dict[str, float | None]

    def ratio(self, method: str) -> float:
        """Epochs to the target / random search's own; +inf when never reached."""
        hit, own = self.epochs[method], self.epochs[BASELINE]
        return math.inf if hit is None or not own else hit / own


def replay_outcome(seed: int, runs: dict[str, Replay]) -> ReplaySeed:
    target = runs[BASELINE].final
    hits = {m: r.reach(target) if target > 0 else None for m, r in runs.items()}
    return ReplaySeed(seed, target, {m: h[0] if h else None for m, h in hits.items()},
                      {m: h[1] if h else None for m, h in hits.items()})


def replay_report(runs: dict[tuple[str, int], Replay], outcomes: Sequence[ReplaySeed],
                  methods: Sequence[str], budget: float) -> tuple[list[str], list[Figure]]:
    """The Markdown table over seeds, hypervolume at fractions of the budget, and the
    targets (median of the per-seed ratios, <= 1/3, never lowered)."""
    from bench_schedules import _fmt, quartiles

    lines = ["| method | trials started | epochs trained | final HV: median [q1, q3] | epochs "
             "to random's final HV: median [q1, q3] | ratio to random: median [q1, q3] | "
             "simulated s to it: median | seeds reaching it |",
             "|---|---|---|---|---|---|---|---|"]
    for method in methods:
        mine = [runs[(method, o.seed)] for o in outcomes]
        e1, e2, e3 = quartiles([math.inf if o.epochs[method] is None else float(o.epochs[method])
                                for o in outcomes])
        q1, q2, q3 = quartiles([o.ratio(method) for o in outcomes])
        f1, f2, f3 = quartiles([r.final for r in mine])
        secs = statistics.median(math.inf if o.seconds[method] is None else o.seconds[method]
                                 for o in outcomes)
        lines.append(
            f"| {REPLAY_LABELS[method]} | {statistics.median(r.run.trials for r in mine):g} | "
            f"{statistics.median(r.epochs for r in mine):g} | {f2:.4f} [{f1:.4f}, {f3:.4f}] | "
            f"{_fmt(e2, 4)} [{_fmt(e1, 4)}, {_fmt(e3, 4)}] | {_fmt(q2)} [{_fmt(q1)}, "
            f"{_fmt(q3)}] | {_fmt(secs, 4)} | "
            f"{sum(o.epochs[method] is not None for o in outcomes)}/{len(outcomes)} |")
    lines += ["", "hypervolume (share of the box; median over seeds) at a fraction of the "
              f"budget ({budget:.0f} simulated s)",
              "| method | " + " | ".join(f"{f:.2g} ({f * budget:.0f} s)"
                                         for f in REPLAY_FRACTIONS) + " |",
              "|---|" + "---|" * len(REPLAY_FRACTIONS)]
    for method in methods:
        mine = [runs[(method, o.seed)] for o in outcomes]
        lines.append(f"| {REPLAY_LABELS[method]} | " + " | ".join(
            f"{statistics.median(value_at(r.curve, r.times, 0.0, seconds=f * budget) for r in mine):.4f}"  # noqa: E501
            for f in REPLAY_FRACTIONS) + " |")
    figures = []
    base = statistics.median(math.inf if o.epochs[BASELINE] is None else o.epochs[BASELINE]
                             for o in outcomes)
    for method in (m for m in ASHA if m in methods):
        ratio = statistics.median(o.ratio(method) for o in outcomes)
        hit = statistics.median(math.inf if o.epochs[method] is None else o.epochs[method]
                                for o in outcomes)
        figures.append(Figure(
            f"{REPLAY_LABELS[method]}: epochs to random search's final hypervolume / random's "
            f"own (median, {len(outcomes)} seeds, replayed on measured curves)",
            "bench_multiobjective.py", f"{_fmt(hit, 4)} epochs",
            f"{_fmt(base, 4)} epochs random search", _fmt(ratio), "<= 1/3",
            ratio <= TARGET_EPOCHS))
    return lines, figures


def _replay_seed(task: tuple[MOTable, int, float, int, float, Sequence[str], int]
                 ) -> tuple[int, dict[str, Replay]]:
    """One seed's runs of every method (for a process pool: the stoppers' studies are left
    out of what comes back)."""
    table, seed, budget, slots, gap, methods, min_resource = task
    runs = {m: replay(table, m, seed, budget, slots, gap, min_resource=min_resource)
            for m in methods}
    for run in runs.values():
        run.stopper = None
    return seed, runs


def run_replay(table_path: Path, seeds: int, slots: int, budget: float | None,
               gap: float | None, methods: Sequence[str], json_out: str | None,
               jobs: int = 1, min_resource: int = 1) -> int:
    """``--replay``: every method on seeds 0..seeds-1 over the measured table (``jobs``
    processes); prints the table's description, the report and PASS/MISS."""
    from bench_schedules import GAP_SECONDS, default_budget

    try:
        table = MOTable.load(table_path)
    except (OSError, ValueError, TypeError) as error:
        print(f"error: cannot read the table {table_path}: {error} (measure it with "
              "--tabulate N)", file=sys.stderr)
        return 2
    gap = GAP_SECONDS if gap is None else gap
    budget = budget or default_budget(table, slots, gap=gap)
    print(machine_line())
    print(f"table: {table.problem} ({len(table.params)} configurations; measured on "
          f"{table.machine.split(';')[0].removeprefix('machine: ')}, "
          f"{table.machine.rsplit(';', 1)[-1].strip()})")
    for line in describe(table):
        print(line)
    print(f"epoch {statistics.median(table.epoch_seconds):.3f} s (median), trial start "
          f"{table.start_seconds:.3f} s + {gap:.3f} s between segments, checkpoint save + load "
          f"{table.checkpoint_seconds:.4f} s; rungs "
          f"{'/'.join(map(str, rung_ladder(min_resource, table.max_epochs)))}, eta "
          f"{REDUCTION_FACTOR}; {slots} slots; {budget:.0f} simulated s per run (random search's"
          f" time for 64 configurations); seeds 0..{seeds - 1}; reference point "
          f"{REPLAY_REFERENCE}", flush=True)
    started = time.perf_counter()
    runs: dict[tuple[str, int], Replay] = {}
    outcomes = []
    tasks = [(table, seed, budget, slots, gap, tuple(methods), min_resource)
             for seed in range(seeds)]
    if jobs > 1 and seeds > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(min(jobs, seeds)) as pool:
            done = pool.map(_replay_seed, tasks, chunksize=1)
    else:
        done = [_replay_seed(task) for task in tasks]
    for seed, mine in done:
        runs.update({(m, seed): r for m, r in mine.items()})
        outcomes.append(replay_outcome(seed, mine))
    lines, figures = replay_report(runs, outcomes, methods, budget)
    print(f"\nreplayed {len(methods)} methods x {seeds} seeds in "
          f"{time.perf_counter() - started:.1f} s ({jobs} process(es))\n")
    print("\n".join(lines))
    print()
    for figure in figures:
        print(f"{figure.verdict}  {figure.what}: {figure.measured} vs {figure.baseline}, ratio "
              f"{figure.ratio} (target {figure.target})")
    print("Syne Tune's wall-clock target needs the launcher mode (no --replay): the replay "
          "has no Syne Tune.")
    write_figures(json_out, figures)
    return 0


# -- the report ----------------------------------------------------------------------------


def _num(value: float | None, fmt: str = ".4f") -> str:
    return "-" if value is None or math.isnan(value) else (
        "inf" if math.isinf(value) else f"{value:{fmt}}")


def median(values: Sequence[float]) -> float:
    """The median, NaN for none (infinite values count: never reached)."""
    return statistics.median(values) if values else math.nan


@dataclass
class Reached:
    """Per seed: random search's final hypervolume, and each method's epochs and seconds to
    it (None: never)."""

    target: float
    epochs: dict[str, int | None]
    seconds: dict[str, float | None]


def reached(results: dict[tuple[str, int], RunResult], methods: Sequence[str],
            seed: int) -> Reached:
    """Who reached random search's final hypervolume of ``seed``, in how many epochs and
    seconds."""
    target = results[(BASELINE, seed)].final
    got = {m: results[(m, seed)].reach(target) for m in methods if (m, seed) in results}
    return Reached(target, {m: r[0] if r else None for m, r in got.items()},
                   {m: r[1] if r else None for m, r in got.items()})


def epoch_ratios(results: dict[tuple[str, int], RunResult], method: str,
                 seeds: Sequence[int]) -> list[float]:
    """Per seed: ``method``'s epochs to random search's final hypervolume over random search's
    own (infinite when it never reached it).

    Example::

        >>> pts = [EpochPoint(float(k), 0, k, (0.5, 1.0)) for k in range(1, 10)]
        >>> rs = RunResult("random", 0, 0.0, 9.0, pts, [0.1] * 8 + [0.4], 1)
        >>> asha = RunResult("moasha-stop", 0, 0.0, 9.0, pts, [0.1, 0.2, 0.5] + [0.5] * 6, 3)
        >>> epoch_ratios({("random", 0): rs, ("moasha-stop", 0): asha}, "moasha-stop", [0])
        [0.3333333333333333]
    """
    out = []
    for seed in seeds:
        r = reached(results, [BASELINE, method], seed)
        ours, base = r.epochs[method], r.epochs[BASELINE]
        out.append(math.inf if ours is None or not base else ours / base)
    return out


def wall_ratios(results: dict[tuple[str, int], RunResult], method: str,
                seeds: Sequence[int]) -> list[tuple[float, float, float]]:
    """Per seed: (our seconds, Syne Tune's seconds, their ratio) to the highest hypervolume
    both reached (the lower of their finals).

    Example::

        >>> pts = [EpochPoint(float(k), 0, k, (0.5, 1.0)) for k in (1, 2)]
        >>> a = RunResult("moasha-stop", 0, 0.0, 3.0, pts, [0.2, 0.4], 1)
        >>> b = RunResult("syne-tune", 0, -2.0, 9.0, pts, [0.3, 0.3], 1)
        >>> wall_ratios({("moasha-stop", 0): a, ("syne-tune", 0): b}, "moasha-stop", [0])
        [(2.0, 3.0, 0.6666666666666666)]
    """
    out = []
    for seed in seeds:
        ours, peer = results[(method, seed)], results[(PEER, seed)]
        level = min(ours.final, peer.final)
        a, b = ours.reach(level), peer.reach(level)
        assert a is not None and b is not None  # each reached its own final
        out.append((a[1], b[1], a[1] / b[1] if b[1] > 0 else math.inf))
    return out


def report(results: dict[tuple[str, int], RunResult], methods: Sequence[str],
           seeds: Sequence[int], skipped: dict[str, str], epochs: int
           ) -> tuple[list[str], list[Figure]]:
    """The printed tables, and the headline figures for ``run_all.py``."""
    lines = [f"per run (budget {epochs} epochs; HV: share of the reference box; to RS: epochs "
             "and seconds to random search's final HV of the same seed)"]
    head = (f"{'method':<18} {'seed':>4} {'trials':>6} {'epochs':>6} {'wall s':>7} "
            f"{'final HV':>9} {'RS final':>9} {'epochs to RS':>12} {'s to RS':>8}")
    lines += [head, "-" * len(head)]
    for seed in seeds:
        r = reached(results, methods, seed)
        for method in methods:
            run = results.get((method, seed))
            if run is None:
                lines.append(f"{LABELS[method]:<18} {seed:>4}  {skipped.get(method, '')}")
                continue
            lines.append(
                f"{LABELS[method]:<18} {seed:>4} {run.trials:>6} {run.epochs:>6} "
                f"{run.wall:>7.1f} {run.final:>9.5f} {r.target:>9.5f} "
                f"{_num(r.epochs[method], 'd'):>12} {_num(r.seconds[method], '.1f'):>8}")
    ran = [m for m in methods if all((m, s) in results for s in seeds)]
    lines += ["", f"median over seeds {', '.join(map(str, seeds))}", head.replace(
        f"{'seed':>4}", "    ").replace(f"{'RS final':>9}", f"{'ratio':>9}"), "-" * len(head)]
    for method in methods:
        if method not in ran:
            lines.append(f"{LABELS[method]:<18}       {skipped.get(method, '')}")
            continue
        runs = [results[(method, s)] for s in seeds]
        per_seed = [reached(results, [method], s) for s in seeds]
        to_epochs = [math.inf if p.epochs[method] is None else float(p.epochs[method])
                     for p in per_seed]
        to_seconds = [math.inf if p.seconds[method] is None else p.seconds[method]
                      for p in per_seed]
        ratio = median(epoch_ratios(results, method, seeds))
        lines.append(
            f"{LABELS[method]:<18}      {median([r.trials for r in runs]):>6g} "
            f"{median([r.epochs for r in runs]):>6g} {median([r.wall for r in runs]):>7.1f} "
            f"{median([r.final for r in runs]):>9.5f} {_num(ratio, '.2f'):>9} "
            f"{_num(median(to_epochs), 'g'):>12} {_num(median(to_seconds), '.1f'):>8}")
    lines += ["", "hypervolume against epochs (median over seeds; epochs summed over all trials "
              "in the order they ended)"]
    marks = sorted({max(1, round(f * epochs)) for f in FRACTIONS})
    lines.append(f"{'method':<18} " + " ".join(f"{m:>9}" for m in marks))
    for method in ran:
        curves = [results[(method, s)].curve for s in seeds]
        lines.append(f"{LABELS[method]:<18} " + " ".join(
            f"{median([value_at(c, [], 0.0, epochs=m) for c in curves]):>9.5f}" for m in marks))
    longest = max(r.wall for r in results.values())
    seconds = [s for s in SECONDS if s < longest] + [math.ceil(longest)]
    lines += ["", "hypervolume against wall-clock (median over seeds; seconds from the "
              "run's process start)", f"{'method':<18} " + " ".join(f"{s:>8}s" for s in seconds)]
    for method in ran:
        row = []
        for s in seconds:
            runs = [results[(method, seed)] for seed in seeds]
            row.append(median([value_at(r.curve, r.times, r.start, seconds=s) for r in runs]))
        lines.append(f"{LABELS[method]:<18} " + " ".join(f"{v:>9.5f}" for v in row))
    figures = []
    rs_epochs = [reached(results, [BASELINE], s).epochs[BASELINE] or 0 for s in seeds]
    for method in (m for m in ASHA if m in ran):
        ratios = epoch_ratios(results, method, seeds)
        ratio = median(ratios)
        to = [reached(results, [method], s).epochs[method] for s in seeds]
        measured = median([math.inf if e is None else float(e) for e in to])
        met = ratio <= TARGET_EPOCHS
        lines.append(f"\n{LABELS[method]}: epochs to random search's final HV, median "
                     f"{_num(measured, 'g')} vs random search's {_num(median(rs_epochs), 'g')}: "
                     f"median ratio {_num(ratio, '.2f')} (per seed "
                     f"{', '.join(_num(x, '.2f') for x in ratios)}; target <= 0.33): "
                     f"{'PASS' if met else 'MISS'}")
        figures.append(Figure(
            f"{LABELS[method]} epochs to random search's final hypervolume",
            "bench_multiobjective.py", f"{_num(measured, 'g')} epochs",
            f"{_num(median(rs_epochs), 'g')} epochs random search", _num(ratio, ".2f"),
            "<= 0.33", met))
    for method in (m for m in ASHA if m in ran):
        what = f"{LABELS[method]} wall-clock to the same hypervolume as Syne Tune MOASHA"
        if PEER not in ran:
            lines.append(f"{what}: {skipped.get(PEER, 'skipped')}")
            figures.append(Figure(what, "bench_multiobjective.py", skipped.get(PEER, "skipped"),
                                  "-", "-", "<= 1.00x", None))
            continue
        walls = wall_ratios(results, method, seeds)
        ratio = median([w[2] for w in walls])
        a, b = median([w[0] for w in walls]), median([w[1] for w in walls])
        met = ratio <= TARGET_WALL
        lines.append(f"{what} (the highest both reached, per seed): median {a:.1f} s vs "
                     f"{b:.1f} s: median ratio {ratio:.2f}x (per seed "
                     f"{', '.join(f'{w[2]:.2f}' for w in walls)}; target <= 1.00x): "
                     f"{'PASS' if met else 'MISS'}")
        figures.append(Figure(what, "bench_multiobjective.py", f"{a:.1f} s",
                              f"{b:.1f} s Syne Tune", f"{ratio:.2f}x", "<= 1.00x", met))
    return lines, figures


def main(argv: list[str] | None = None) -> int:
    global SYNE_SITE
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help="seeds, the same for every method (default 0 1 2; 0 with --smoke)")
    parser.add_argument("--trials", type=int, default=None,
                        help="the budget: this many full trials' epochs (x 9) per run, "
                        f"summed over all trials (default {DEFAULT_TRIALS}; {SMOKE_TRIALS} "
                        "with --smoke)")
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS),
                        help="methods to run (random search always runs: the baseline)")
    parser.add_argument("--smoke", action="store_true",
                        help=f"seed 0, {SMOKE_TRIALS} trials' epochs")
    parser.add_argument("--install-syne-tune", action="store_true",
                        help=f"install Syne Tune into {SYNE_SITE} first (pip, the registry)")
    parser.add_argument("--no-syne-tune", action="store_true",
                        help="leave Syne Tune out even where it is installed")
    parser.add_argument("--syne-sleep-time", type=float, default=5.0,
                        help="Syne Tune's polling interval (default 5 s, its own default: a "
                        "trial MOASHA stops trains on until the tuner reads its result)")
    parser.add_argument("--syne-site", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None,
                        help="keep the journals, logs and the per-epoch record here (default: "
                        "a temporary folder)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures for run_all.py")
    replay_group = parser.add_argument_group(
        "replay on measured curves (no training; --tabulate measures the table)")
    replay_group.add_argument("--replay", type=int, nargs="?", const=REPLAY_SEEDS,
                              metavar="SEEDS", default=None,
                              help="replay random search, MO-ASHA (stopping, promotion) and "
                              f"sync SH on the measured table, seeds 0..SEEDS-1 (default "
                              f"{REPLAY_SEEDS})")
    replay_group.add_argument("--table", type=Path, default=TABLE,
                              help="the measured table (default benchmarks/data/"
                              f"{TABLE.name})")
    replay_group.add_argument("--tabulate", type=int, metavar="N", default=None,
                              help=f"first measure N configurations to epoch {TABLE_EPOCHS} "
                              "through the launcher into --table (the launcher stops after "
                              f"{TABULATE_WALL:.0f} s: about 200 on 2 cores)")
    replay_group.add_argument("--slots", type=int, default=WORKERS,
                              help=f"simulated slots (default {WORKERS}); CPU slots of "
                              "--tabulate")
    replay_group.add_argument("--budget", type=float, default=None,
                              help="simulated seconds per run (default: random search's time "
                              "for 64 configurations on the slots)")
    replay_group.add_argument("--gap", type=float, default=None,
                              help="seconds between two segments on a slot (default "
                              "bench_schedules.GAP_SECONDS)")
    replay_group.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                              help="processes replaying seeds (default: up to 2)")
    replay_group.add_argument("--min-resource", type=int, default=1,
                              help="the first rung of the replayed MO-ASHAs and sync SH, in "
                              "epochs (default 1: rungs 1/3/9/27)")
    parser.add_argument("--launch", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--epochs-total", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if args.launch is not None:
        launch(args.launch, args.epochs_total)
        return 0
    if args.tabulate is not None or args.replay is not None:
        if (args.tabulate is not None and args.tabulate < 1) or args.slots < 1 or (
                args.replay is not None and args.replay < 1) or (
                args.budget is not None and args.budget <= 0) or (
                args.gap is not None and args.gap < 0) or not (
                1 <= args.min_resource <= MAX_REPLAY_MIN_RESOURCE):
            parser.error("--tabulate, --replay, --slots and --budget must be positive, --gap "
                         f">= 0, --min-resource 1..{MAX_REPLAY_MIN_RESOURCE}")
        if args.tabulate is not None:
            table = tabulate(args.tabulate, args.table, args.slots)
            print(f"{len(table.params)} configurations measured into {args.table}")
        if args.replay is None:
            return 0
        return run_replay(args.table, args.replay, args.slots, args.budget, args.gap,
                          REPLAY_METHODS, args.json, max(1, args.jobs), args.min_resource)
    if args.syne_site is not None:
        SYNE_SITE = args.syne_site.resolve()
    seeds = args.seeds or ([0] if args.smoke else [0, 1, 2])
    trials = args.trials or (SMOKE_TRIALS if args.smoke else DEFAULT_TRIALS)
    if trials < 1 or len(set(seeds)) != len(seeds):
        parser.error("--trials must be positive and --seeds must differ")
    epochs = trials * MAX_EPOCHS
    methods = [m for m in METHODS if m == BASELINE or m in args.methods]
    skipped: dict[str, str] = {}
    if PEER in methods:
        if args.no_syne_tune:
            skipped[PEER] = "skipped: left out (--no-syne-tune)"
        elif not syne_tune_found(args.install_syne_tune):
            skipped[PEER] = f"skipped: syne-tune not installed (run {INSTALL_HINT})"
        if PEER in skipped:
            print(f"Syne Tune MOASHA: {skipped[PEER]}")
    ref = reference()
    area = ref[0] * ref[1]
    print(machine_line())
    print(f"LeNet on digits, objectives {' and '.join(METRICS)} (both minimised), space "
          f"{json.dumps(SPACE)}, <= {MAX_EPOCHS} epochs a trial, rungs 1/3/9, {WORKERS} "
          f"workers x 1 thread; budget {epochs} epochs per run ({trials} full trials); seeds "
          f"{seeds}; methods {', '.join(LABELS[m] for m in methods)}; reference point "
          f"{ref}", flush=True)
    check = None
    if PEER in methods and PEER not in skipped:
        check = syne_tune_check()
        print(f"Syne Tune 0.16 MOASHA at a rung holding {check['rung']}, new {check['new']} "
              f"(eta 3, both minimised): {check['decision']}; lightning_hpo.pareto.pareto_order"
              f" ranks the new point first: {check['ours']} (trial 3 is the new one)")
    root = args.out or Path(tempfile.mkdtemp(prefix="bench-mo-"))
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    results: dict[tuple[str, int], RunResult] = {}
    for seed in seeds:
        configs = configurations(seed, epochs)  # enough: every trial trains an epoch or more
        for method in methods:
            if method in skipped:
                continue
            result = (run_syne_tune(seed, configs, epochs, root, ref, args.syne_sleep_time)
                      if method == PEER
                      else run_ours(method, seed, configs, epochs, root, ref))
            results[(method, seed)] = result
            print(f"seed {seed} {LABELS[method]:<18} {result.trials:>3} trials {result.epochs:>4}"
                  f" epochs {result.wall:6.1f} s  final HV {result.final / area:.5f}", flush=True)
    scaled = {key: RunResult(r.method, r.seed, r.start, r.wall, r.points,
                             [v / area for v in r.curve], r.trials)
              for key, r in results.items()}
    lines, figures = report(scaled, methods, seeds, skipped, epochs)
    print("\n" + "\n".join(lines))
    if check is not None:
        figures.append(Figure("Syne Tune 0.16 MOASHA: a new (0.1, 0.1) at a rung of (0.5, 0.5),"
                              " (0.6, 0.6), (0.7, 0.7)", "bench_multiobjective.py",
                              check["decision"], "ours: ranked first (continue)", "-", "-",
                              None))
    record = {"seeds": seeds, "epochs": epochs, "reference": ref, "skipped": skipped,
              "check": check, "runs": [
                  {"method": r.method, "seed": r.seed, "wall": r.wall, "trials": r.trials,
                   "epochs": r.epochs, "hypervolume": r.curve,
                   "seconds": [t - r.start for t in r.times]} for r in scaled.values()]}
    (root / "record.json").write_text(json.dumps(record))
    print(f"\nper-epoch record: {root / 'record.json'}")
    write_figures(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
