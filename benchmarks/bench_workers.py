"""Scaling: trials finished per minute with 1, 2 and 4 asynchronous workers, where the cores are.

What is measured: asynchronous random search through the launcher's own ``Supervisor`` (run in
this process), no pruning, a fixed number of trials (``stop.n_trials``), each trial LeNet on
scikit-learn's digits for 3 epochs at batch size 64 (lr and momentum are searched, so every
trial costs the same). The same study is run with ``devices.count`` = 1, 2 and 4 CPU slots
(``--workers``); each worker gets one torch thread (``n_cores`` = number of workers), so N
workers use N cores. A count above the cores this process may use (``os.sched_getaffinity``)
is not run: N single-threaded workers on fewer cores measure the time-sharing, not the
launcher. The script says so in a line ("4 workers need 4 cores; this machine has 2") and in
the figures.

How: the supervisor's per-trial rows hold when each trial's ``fit`` started and when it ended.
*Steady state* counts the trials finished between the first trial's fit start and the end of the
last trial, divided by that window, so the one-off worker start-up (several seconds of imports)
is not in it. *End to end* is finished trials over the supervisor's whole run, start-up included.
The baseline is the 1-worker run of the same invocation; the speed-up is N-worker trials per
minute / 1-worker trials per minute.

Target (issue 6): steady-state speed-up >= 1.8x with 2 workers. 4 workers are printed with no
target.

Next to each count it measures what the machine itself allows (no target): the same training in
N plain processes (no launcher, no storage; ``Trainer.fit`` of the same LeNet, 1 thread each),
started together after their imports, against one alone; that speed-up is the ceiling the
launcher's can be read against on a shared or hyper-threaded VM (``--no-ceiling`` skips it).

GPU mode (``--gpu``): the same study on one GPU (``devices: {accelerator: gpu, count: 1}``) with
``trials_per_device`` 1, 2 and 4 (several trials sharing the GPU); the baseline is 1 trial per
GPU. It prints the same table and the speed-ups, with no target line (issue 6 sets none).

    python benchmarks/bench_workers.py              # 120 trials per run (~2 min on 2 cores)
    python benchmarks/bench_workers.py --quick      # 8 trials per run (~30 s)
    python benchmarks/bench_workers.py --workers 1 2 4 8 --trials 80
    python benchmarks/bench_workers.py --gpu --trials 48
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import optuna
from _record import Figure, machine_line, write_figures

TARGET_SPEEDUP = 1.8
EPOCHS = 3
BATCH_SIZE = 64
WORKERS = (1, 2, 4)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity; ``os.cpu_count()`` without one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def split_by_cores(counts: Iterable[int], cores: int) -> tuple[list[int], list[tuple[int, str]]]:
    """The worker counts to run (1, the baseline, always first) and those left out, with why.

    Example::

        >>> split_by_cores([4, 2, 1], cores=2)
        ([1, 2], [(4, '4 workers need 4 cores; this machine has 2')])
    """
    wanted = sorted({1, *counts})
    run = [n for n in wanted if n <= cores]
    skipped = [(n, f"{n} workers need {n} cores; this machine has {cores}")
               for n in wanted if n > cores]
    return run, skipped


class _Row(Protocol):
    """What the throughput needs of a trial (``launch.processes.supervisor.TrialRow``)."""

    fit_started: float | None
    ended: float | None


@dataclass(frozen=True)
class Throughput:
    """Trials finished in a window of ``seconds``, and the rate per minute."""

    trials: int
    seconds: float

    @property
    def per_minute(self) -> float:
        """Trials per minute (0 for an empty window)."""
        return 60.0 * self.trials / self.seconds if self.seconds > 0 else 0.0


def steady_state(rows: Iterable[_Row]) -> Throughput:
    """Trials finished from the first trial's fit start to the end of the last trial.

    Rows without an end (still running) are not counted; a trial that ended before the first
    fit started (impossible in a real run) neither.

    Raises:
        ValueError: when no trial both started fitting and ended.

    Example::

        >>> from types import SimpleNamespace as Row
        >>> steady_state([Row(fit_started=10.0, ended=13.0), Row(fit_started=11.0, ended=16.0)])
        Throughput(trials=2, seconds=6.0)
    """
    rows = list(rows)
    first, last = steady_window(rows)
    finished = sum(1 for r in rows if r.ended is not None and r.ended >= first)
    return Throughput(finished, last - first)


def all_complete(rows: Iterable[Any], n_trials: int, label: str, hint: str = "") -> dict[str, int]:
    """Trials by state; exits with what went wrong unless all ``n_trials`` are COMPLETE."""
    rows = list(rows)
    states: dict[str, int] = {}
    for row in rows:
        states[row.state] = states.get(row.state, 0) + 1
    if states.get("COMPLETE", 0) != n_trials:
        reasons = {row.reason for row in rows if row.reason}
        raise SystemExit(f"{label}: {states} of {n_trials} trials; {reasons or ''}{hint}")
    return states


def steady_window(rows: Iterable[_Row]) -> tuple[float, float]:
    """The first trial's fit start and the last trial's end (unix seconds).

    Raises:
        ValueError: when no trial both started fitting and ended.
    """
    rows = list(rows)
    starts = [r.fit_started for r in rows if r.fit_started is not None]
    ends = [r.ended for r in rows if r.ended is not None]
    if not starts or not ends:
        raise ValueError("no trial started fitting and ended")
    return min(starts), max(ends)


def end_to_end(rows: Iterable[_Row], wall_seconds: float) -> Throughput:
    """Trials finished over the whole run (worker start-up included)."""
    return Throughput(sum(1 for r in rows if r.ended is not None), wall_seconds)


def speedup(ours: Throughput, baseline: Throughput) -> float:
    """Trials per minute relative to the baseline's (``inf`` when the baseline finished none)."""
    return ours.per_minute / baseline.per_minute if baseline.per_minute > 0 else float("inf")


# -- the machine's own ceiling: the same training in plain parallel processes ----------------


def _child_train(trials: int) -> None:
    """A plain process: import, say ready, wait for go, train ``trials`` trials, print times."""
    import json
    import logging
    import warnings

    import lightning as L
    import torch

    from lightning_hpo.builtin.data import DigitsDataModule
    from lightning_hpo.builtin.models import LeNet

    torch.set_num_threads(1)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.time()
    for number in range(trials):
        L.seed_everything(number, verbose=False)
        trainer = L.Trainer(
            accelerator="cpu", devices=1, max_epochs=EPOCHS, logger=False,
            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
            num_sanity_val_steps=0,
        )
        trainer.fit(LeNet(lr=0.1), datamodule=DigitsDataModule(batch_size=BATCH_SIZE))
    print(json.dumps({"start": start, "end": time.time(), "trials": trials}), flush=True)


def ceiling(processes: int, trials_each: int) -> Throughput:
    """Trials per minute of ``processes`` plain training processes started together.

    No launcher, no storage: each process imports, waits until all are ready, then trains
    ``trials_each`` trials of the same LeNet (1 torch thread). The window runs from the first
    start to the last end, as :func:`steady_state` does.
    """
    import json
    import subprocess

    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    children = [
        subprocess.Popen([sys.executable, __file__, "--child-train", str(trials_each)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(processes)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise SystemExit("a ceiling process failed to start")
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        times = [json.loads(child.communicate()[0].strip().splitlines()[-1])
                 for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    window = max(t["end"] for t in times) - min(t["start"] for t in times)
    return Throughput(processes * trials_each, window)


# -- running --------------------------------------------------------------------------------


def build_config(name: str, storage: str, run_dir: str, trials: int, accelerator: str,
                 count: int, trials_per_device: int) -> dict[str, Any]:
    """The launcher config of one run, as the raw mapping."""
    return {
        "study": name, "storage": storage, "run_dir": run_dir,
        "model": {"name": "lenet"}, "data": {"name": "digits", "batch_size": BATCH_SIZE},
        "space": {"lr": {"loguniform": [0.01, 1.0]}, "momentum": {"uniform": [0.0, 0.9]}},
        "sampler": {"name": "random", "seed": 0}, "pruner": "none",
        "trainer": {"max_epochs": EPOCHS},
        "devices": {"accelerator": accelerator, "count": count, "per_trial": 1,
                    "trials_per_device": trials_per_device},
        "stop": {"n_trials": trials},
    }


@dataclass
class RunResult:
    """One run: its label, slots, torch threads per worker, and the two throughputs."""

    label: str
    slots: int
    threads: int
    steady: Throughput
    total: Throughput
    states: dict[str, int]


def run(raw: dict[str, Any], label: str, n_cores: int | None) -> RunResult:
    """Run one study with the supervisor; ``n_cores`` None: all cores of this process."""
    from lightning_hpo.launch.config import parse_config
    from lightning_hpo.launch.config.devices import detect_devices, plan_slots, threads_per_process
    from lightning_hpo.launch.processes.supervisor import Supervisor
    from lightning_hpo.launch.study.creation import open_study
    from lightning_hpo.storage import open_storage

    cfg = parse_config(raw)
    kind, n_devices = detect_devices(cfg.devices.accelerator, cfg.devices.count)
    slots = plan_slots(n_devices, cfg.devices.per_trial, cfg.devices.trials_per_device)
    cores = n_cores if n_cores is not None else len(os.sched_getaffinity(0))
    study, _ = open_study(cfg, open_storage(cfg.storage))
    sup = Supervisor(cfg, study, slots, kind, n_cores=cores)
    start = time.time()
    sup.run()
    wall = time.time() - start
    rows = list(sup.rows.values())
    states = all_complete(rows, cfg.stop.n_trials, label)
    return RunResult(label, len(slots), threads_per_process(cores, len(slots)),
                     steady_state(rows), end_to_end(rows, wall), states)


def report(results: list[RunResult], gpu: bool,
           ceilings: dict[int, Throughput] | None = None,
           skipped: Sequence[tuple[int, str]] = ()) -> tuple[bool, list[Figure]]:
    """Print the table, the speed-ups against the first run, the counts not run and the target
    line; returns whether the target was met, and the headline figures. ``ceilings`` maps a
    number of plain processes to their throughput (1 is their baseline)."""
    print(f"\n{'run':<26} {'slots':>5} {'threads':>7} {'trials':>6} {'steady s':>9} "
          f"{'steady /min':>11} {'total s':>8} {'total /min':>10}")
    for r in results:
        print(f"{r.label:<26} {r.slots:>5} {r.threads:>7} {r.steady.trials:>6} "
              f"{r.steady.seconds:>9.1f} {r.steady.per_minute:>11.1f} {r.total.seconds:>8.1f} "
              f"{r.total.per_minute:>10.1f}")
    for k, c in sorted((ceilings or {}).items()):
        print(f"{f'{k} plain process(es)':<26} {k:>5} {1:>7} {c.trials:>6} "
              f"{c.seconds:>9.1f} {c.per_minute:>11.1f} {'-':>8} {'-':>10}")
    for count, why in skipped:
        print(f"{f'{count} CPU workers':<26} not run: {why}")
    base = results[0]
    print()
    for r in results[1:]:
        print(f"speed-up {r.label} vs {base.label}: steady state "
              f"{speedup(r.steady, base.steady):.2f}x, end to end "
              f"{speedup(r.total, base.total):.2f}x")
    if ceilings and 1 in ceilings:
        for k, c in sorted(ceilings.items()):
            if k > 1:
                print(f"machine ceiling: {k} plain training processes (no launcher) vs 1: "
                      f"{speedup(c, ceilings[1]):.2f}x")
    if gpu:
        print("(GPU mode: no target set; the speed-ups above are the figures)")
        return True, [
            Figure(f"trials/min, {r.label}", "bench_workers.py --gpu",
                   f"{r.steady.per_minute:.1f}/min", f"{base.steady.per_minute:.1f}/min",
                   f"{speedup(r.steady, base.steady):.2f}x", "-", None)
            for r in results[1:]
        ]
    cores = available_cores()
    ok = True
    figures = []
    for r in results[1:]:
        ratio = speedup(r.steady, base.steady)
        target = r.slots == 2
        met = ratio >= TARGET_SPEEDUP if target else None
        ok = ok and met is not False
        figures.append(Figure(
            f"trials per minute, {r.slots} workers vs 1 ({cores} cores)", "bench_workers.py",
            f"{r.steady.per_minute:.1f}/min", f"{base.steady.per_minute:.1f}/min",
            f"{ratio:.2f}x", f">= {TARGET_SPEEDUP}x" if target else "-", met))
        if target:
            print(f"{'PASS' if met else 'MISS'}  2 workers finish >= {TARGET_SPEEDUP}x the "
                  f"trials per minute of 1 worker, steady state ({ratio:.2f}x)")
        if ceilings and 1 in ceilings and r.slots in ceilings:
            plain = ceilings[r.slots]
            figures.append(Figure(
                f"machine ceiling, {r.slots} plain processes vs 1 ({cores} cores)",
                "bench_workers.py", f"{plain.per_minute:.1f}/min",
                f"{ceilings[1].per_minute:.1f}/min",
                f"{speedup(plain, ceilings[1]):.2f}x", "-", None))
    for count, why in skipped:
        figures.append(Figure(f"trials per minute, {count} workers vs 1", "bench_workers.py",
                              "not run", why, "-", "-", None))
    if not any(r.slots == 2 for r in results):
        print("(no 2-worker run, so no target line: 2 workers need 2 cores)")
    return ok, figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: python benchmarks/bench_workers.py --trials 120 --workers 1 2 4",
    )
    parser.add_argument("--trials", type=int, default=None,
                        help="trials per run (default 120; 8 with --quick)")
    parser.add_argument("--quick", action="store_true", help="8 trials per run")
    parser.add_argument("--workers", type=int, nargs="+", default=list(WORKERS),
                        help="CPU worker counts, each run where the machine has that many cores "
                        "(default 1 2 4; 1 is the baseline and always runs)")
    parser.add_argument("--no-ceiling", action="store_true",
                        help="skip the plain-process reference (CPU mode)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures for run_all.py")
    parser.add_argument("--child-train", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--gpu", action="store_true",
                        help="one GPU with trials_per_device 1, 2, 4 instead of CPU workers")
    args = parser.parse_args(argv)
    if args.child_train is not None:
        _child_train(args.child_train)
        return 0
    trials = args.trials or (8 if args.quick else 120)
    if trials < 2:
        parser.error("--trials must be >= 2")
    if min(args.workers) < 1:
        parser.error("--workers must be >= 1")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print(machine_line(gpu=args.gpu))
    cores = available_cores()
    counts, skipped = ([], []) if args.gpu else split_by_cores(args.workers, cores)
    what = ("1 GPU, 1/2/4 trials per GPU" if args.gpu else
            f"{'/'.join(map(str, counts))} CPU worker(s) x 1 thread on {cores} cores")
    print(f"random search, no pruning, {trials} trials of LeNet on digits ({EPOCHS} epochs, "
          f"batch {BATCH_SIZE}) per run; {what}")
    for count, why in skipped:
        print(f"{count} CPU workers: not run: {why}")
    plan: list[tuple[str, str, int, int, int | None]] = (
        [(f"1 GPU x {k} trial(s)", "gpu", 1, k, None) for k in (1, 2, 4)] if args.gpu
        else [(f"{k} CPU worker(s)", "cpu", k, 1, k) for k in counts]
    )
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
        for index, (label, accelerator, count, per_device, n_cores) in enumerate(plan):
            name = f"workers-{index}"
            raw = build_config(name, str(Path(tmp) / f"{name}.journal"), tmp, trials,
                               accelerator, count, per_device)
            results.append(run(raw, label, n_cores))
            print(f"# {label}: {results[-1].total.seconds:.1f} s", file=sys.stderr, flush=True)
    ceilings = None
    if not args.gpu and not args.no_ceiling:
        each = max(2, trials // 8)
        ceilings = {k: ceiling(k, each) for k in counts}
    ok, figures = report(results, args.gpu, ceilings, skipped)
    write_figures(args.json, figures)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
