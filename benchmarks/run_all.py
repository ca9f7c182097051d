"""``make bench``: run the benchmarks one after another and print one table of their figures.

Each benchmark runs as its own process (so none inherits another's threads, imports or caches),
prints its own detailed table as it goes, and writes its headline figures (``--json``); the
table at the end collects them: what was measured, against which baseline of the same run, the
ratio, the target, and PASS or MISS.

Default: the overheads (Lightning vs a plain loop, the callback per epoch, LeNet's fit in the
channels-last layout against the default, the launcher's idle gap between trials, the pruner's
decision vs Optuna's), about 5 minutes on 2 cores. ``--full``
adds scaling (1, 2 and 4 workers where the machine has the cores), search efficiency (random,
TPE and GP sampling, each with and without ASHA, 3 seeds, the same epoch budget) and
pause/resume (random search vs stopping and promotion ASHA vs synchronous SH, 3 seeds, and the
textbook round's 34 vs 58 epochs) and the launcher against a plain Optuna script on the
quickstart's search (``bench_peers.py``, and its 10x longer epochs) and, with several
objectives, hypervolume against epochs and wall-clock for random search, MO-ASHA (stopping and
promotion) and Syne Tune's MOASHA when installed (``bench_multiobjective.py``, and its
replay of 100 seeds on measured two-objective curves, ``--replay``), about 50
minutes more on 2 idle cores. ``--quick`` runs
every benchmark in its small mode.

    python benchmarks/run_all.py            # make bench
    python benchmarks/run_all.py --full     # make bench-full
    python benchmarks/run_all.py --quick --full

Run it on an otherwise idle machine: the figures are ratios measured in the same run, but a
busy machine makes them noisier.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _record import Figure, machine_line, read_figures

HERE = Path(__file__).resolve().parent
#: (script, arguments, arguments in --quick mode)
OVERHEADS: list[tuple[str, list[str], list[str]]] = [
    ("bench_epoch.py", [], ["--epochs", "3", "--repeats", "2"]),
    ("bench_callback.py", [], ["--epochs", "3", "--repeats", "3"]),
    ("bench_memory_format.py", [], ["--repeats", "1", "--epochs", "2", "--batch-sizes", "128"]),
    ("bench_launch.py", [], ["--trials", "5"]),
    ("bench_pruner.py", [], ["--quick"]),
]
FULL: list[tuple[str, list[str], list[str]]] = [
    ("bench_workers.py", [], ["--quick"]),
    ("bench_search.py", [], ["--quick"]),
    ("bench_promotion.py", [], ["--quick"]),
    ("bench_schedules.py", [], ["--seeds", "10"]),
    ("bench_gpu.py", [], ["--quick"]),
    ("bench_peers.py", [], ["--runs", "1", "--trials", "8"]),
    ("bench_peers.py", ["--long", "--runs", "2"], ["--long", "--runs", "1", "--trials", "4"]),
    ("bench_multiobjective.py", [], ["--smoke"]),
    ("bench_multiobjective.py", ["--replay"], ["--replay", "10"]),
]


def _table(figures: list[Figure]) -> str:
    columns = ("what", "measured", "baseline (same run)", "ratio", "target", "")
    rows = [(f.what, f.measured, f.baseline, f.ratio, f.target, f.verdict) for f in figures]
    widths = [max(len(str(row[i])) for row in [columns, *rows]) for i in range(len(columns))]
    lines = [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [columns, *rows]
    ]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true",
                        help="add scaling, search efficiency, pause/resume and the plain "
                             "Optuna comparison (about 35 minutes more)")
    parser.add_argument("--quick", action="store_true", help="every benchmark in its small mode")
    args = parser.parse_args(argv)
    plan = OVERHEADS + (FULL if args.full else [])
    figures: list[Figure] = []
    failed: list[str] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-all-") as tmp:
        for script, normal, quick in plan:
            out = Path(tmp) / f"{script}.json"
            command = [sys.executable, str(HERE / script), *(quick if args.quick else normal),
                       "--json", str(out)]
            print(f"\n=== {' '.join([Path(command[1]).name, *command[2:-2]])}", flush=True)
            code = subprocess.run(command, cwd=HERE.parent).returncode
            if out.exists():
                figures += read_figures(out)
            else:
                failed.append(f"{script} (exit {code}, no figures)")
    print(f"\n=== all benchmarks, {(time.perf_counter() - started) / 60:.1f} min")
    print(machine_line())
    print(_table(figures))
    met = sum(f.met is True for f in figures)
    targets = sum(f.met is not None for f in figures)
    print(f"\n{met} of {targets} targets met" + (f"; failed: {', '.join(failed)}" if failed
                                                  else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
