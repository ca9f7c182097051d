"""Idle gap between two trials on one worker: long-lived workers vs one process per trial.

Both runs use the launcher's own supervisor and worker on the same study config (LeNet on
digits, 1 epoch of a few batches per trial, no pruning, one CPU slot); the only difference is
that the baseline starts a fresh worker process for every trial (``trials_per_process=1``), as a
design that launches ``python train.py`` per trial would. The gap is measured from the moment a
trial has been told to the study to the moment the next trial's ``fit`` starts on the same slot.

A third run builds every trial through the LightningCLI machinery a project's config uses
(``model``/``data`` by ``class_path``, :mod:`lightning_hpo.launch.checks.project`: the CLI's parser,
links and instantiation each trial) on the same long-lived worker; its gap is the per-trial
cost of building through the parser.

    python benchmarks/bench_launch.py            # 8 trials each
    python benchmarks/bench_launch.py --trials 12

Targets: median gap < 0.2 s (registry names and LightningCLI config both), and the registry's
at least 10x smaller than the fresh-process baseline's.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import optuna
from _record import Figure, machine_line, write_figures

from lightning_hpo.launch.config import parse_config
from lightning_hpo.launch.config.devices import plan_slots
from lightning_hpo.launch.processes.supervisor import Supervisor
from lightning_hpo.launch.study.creation import open_study
from lightning_hpo.storage import open_storage


def _run(root: Path, name: str, trials: int, per_process: int | None,
         cli: bool = False) -> tuple[list[float], float]:
    raw = {
        "study": name, "storage": str(root / f"{name}.journal"), "run_dir": str(root),
        "model": {"name": "lenet"}, "data": {"name": "digits"},
        "space": {"lr": {"loguniform": [0.01, 1.0]}, "batch_size": {"randint": [32, 128]}},
        "sampler": {"name": "random", "seed": 0}, "pruner": "none",
        "trainer": {"max_epochs": 1, "limit_train_batches": 4, "limit_val_batches": 2},
        "devices": {"accelerator": "cpu", "count": 1}, "stop": {"n_trials": trials},
    }
    if cli:  # the same study through LightningCLI: class paths and the CLI's dotted keys
        raw.update(model={"class_path": "lightning_hpo.builtin.models.LeNet"},
                   data={"class_path": "lightning_hpo.builtin.data.DigitsDataModule"},
                   space={"model.init_args.lr": raw["space"]["lr"],
                          "data.init_args.batch_size": raw["space"]["batch_size"]})
    cfg = parse_config(raw)
    study, _ = open_study(cfg, open_storage(cfg.storage))
    sup = Supervisor(cfg, study, plan_slots(1), "cpu", n_cores=1, trials_per_process=per_process)
    start = time.perf_counter()
    sup.run()
    wall = time.perf_counter() - start
    done = sum(t.state.is_finished() for t in study.get_trials(deepcopy=False))
    if done != trials:
        raise SystemExit(f"{name}: only {done}/{trials} trials finished")
    return sup.gaps, wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=8, help="trials per run (default 8)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures for run_all.py")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        ours, ours_wall = _run(Path(tmp), "long-lived", args.trials, None)
        base, base_wall = _run(Path(tmp), "fresh-process", args.trials, 1)
        cli, cli_wall = _run(Path(tmp), "lightning-cli", args.trials, None, cli=True)
    med_ours, med_base = statistics.median(ours), statistics.median(base)
    med_cli = statistics.median(cli)
    print(f"{'design':<34} {'gaps':>4} {'median s':>9} {'max s':>7} {'wall s':>7}")
    print(f"{'long-lived worker (lightning_hpo)':<34} {len(ours):>4} {med_ours:>9.3f} "
          f"{max(ours):>7.3f} {ours_wall:>7.1f}")
    print(f"{'fresh process per trial':<34} {len(base):>4} {med_base:>9.3f} "
          f"{max(base):>7.3f} {base_wall:>7.1f}")
    print(f"{'long-lived, LightningCLI config':<34} {len(cli):>4} {med_cli:>9.3f} "
          f"{max(cli):>7.3f} {cli_wall:>7.1f}")
    ratio = med_base / med_ours
    print(f"baseline/ours median gap: {ratio:.1f}x")
    print(f"target median gap < 0.2 s: {'PASS' if med_ours < 0.2 else 'MISS'} ({med_ours:.3f} s)")
    print(f"target >= 10x smaller than baseline: {'PASS' if ratio >= 10 else 'MISS'} "
          f"({ratio:.1f}x)")
    print(f"target LightningCLI median gap < 0.2 s: {'PASS' if med_cli < 0.2 else 'MISS'} "
          f"({med_cli:.3f} s, {med_cli - med_ours:+.3f} s for building through the parser)")
    ok = med_ours < 0.2 and ratio >= 10
    cli_ok = med_cli < 0.2
    write_figures(args.json, [Figure(
        "idle gap between two trials on one worker", "bench_launch.py",
        f"median {med_ours:.3f} s", f"{med_base:.2f} s fresh process per trial",
        f"{ratio:.0f}x smaller", "< 0.2 s, >= 10x", ok), Figure(
        "idle gap between two trials, LightningCLI config (trials built through the parser)",
        "bench_launch.py", f"median {med_cli:.3f} s", f"{med_ours:.3f} s registry names",
        f"{med_cli - med_ours:+.3f} s", "< 0.2 s", cli_ok)])
    return 0 if ok and cli_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
