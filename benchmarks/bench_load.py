"""Load: 4 processes x 100 trials x 10 reports with ASHA, on SQLite, a journal file and
PostgreSQL. Counts errors, lost trials and missing rung records, and times each storage.

    python benchmarks/bench_load.py                                   # sqlite + journal
    python benchmarks/bench_load.py --postgres postgresql://u@127.0.0.1:5432/db
    python benchmarks/bench_load.py --json                            # one JSON line per storage

Every worker asks trials, reports a noisy learning curve at steps 1..10 and asks the pruner
after each report, exactly as ``PruningCallback`` does; the rungs are 1, 3 and 9 (10 is the
maximum, where no decision is made). Afterwards the study must hold exactly
``processes x trials`` finished trials, and every trial that reported a rung's step must have
its record at that rung, with that value, and no other.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

from lightning_hpo import ASHAPruner
from lightning_hpo._rung_store import rung_records
from lightning_hpo.storage import open_storage

STEPS, LEVELS = 10, (1, 3, 9)


def _pruner() -> ASHAPruner:
    return ASHAPruner(min_resource=1, reduction_factor=3, max_resource=STEPS)


def worker(storage: str, study_name: str, trials: int, seed: int) -> dict[str, object]:
    """One process: ``trials`` trials of ``STEPS`` reports each. Returns counts, never raises."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    rng, errors, done = random.Random(seed), [], 0
    study = optuna.load_study(study_name=study_name, storage=open_storage(storage, create=False),
                              pruner=_pruner())
    for _ in range(trials):
        try:
            trial = study.ask()
            quality = rng.random()
            state = TrialState.COMPLETE
            for step in range(1, STEPS + 1):
                trial.report(quality / math.sqrt(step) + rng.gauss(0, 0.01), step)
                if trial.should_prune():
                    state = TrialState.PRUNED
                    break
            study.tell(trial, None if state == TrialState.PRUNED else quality, state=state)
            done += 1
        except Exception as error:  # counted and reported: the point is that there are none
            errors.append(f"{type(error).__name__}: {error}"[:300])
    return {"done": done, "errors": errors}


def _check(storage: str, study_name: str, expected: int) -> dict[str, object]:
    study = optuna.load_study(study_name=study_name, storage=open_storage(storage, create=False))
    trials = study.get_trials(deepcopy=False)
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    records = {(r.rung, r.trial_number): r.value for r in rung_records(study)}
    wanted = {(level, t.number): t.intermediate_values[level]
              for t in finished for level in LEVELS if level in t.intermediate_values}
    return {
        "trials": len(trials), "finished": len(finished), "lost": expected - len(finished),
        "pruned": sum(t.state == TrialState.PRUNED for t in trials),
        "records": len(records), "missing_records": len(set(wanted) - set(records)),
        "extra_records": len(set(records) - set(wanted)),
        "wrong_values": sum(records[k] != v for k, v in wanted.items() if k in records),
    }


def run(storage: str, processes: int, trials: int) -> dict[str, object]:
    """Create the study, run ``processes`` workers at once, and check the result."""
    name = f"load-{time.time_ns()}"
    optuna.create_study(study_name=name, storage=open_storage(storage), pruner=_pruner())
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", storage, name, str(trials),
                               str(seed)], stdout=subprocess.PIPE, text=True)
             for seed in range(processes)]
    outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    seconds = time.perf_counter() - start
    errors = [e for out in outs for e in out["errors"]]
    return {"seconds": round(seconds, 2), "errors": len(errors), "first_error": errors[:1],
            **_check(storage, name, processes * trials)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=4, metavar=("STORAGE", "STUDY", "TRIALS", "SEED"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--trials", type=int, default=100, help="trials per process")
    parser.add_argument("--postgres", help="a PostgreSQL URL to include")
    parser.add_argument("--json", action="store_true", help="one JSON line per storage")
    args = parser.parse_args()
    if args.worker:
        storage, study, trials, seed = args.worker
        print(json.dumps(worker(storage, study, int(trials), int(seed))))
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        storages = {"sqlite": f"sqlite:///{Path(tmp) / 'load.db'}",
                    "journal": str(Path(tmp) / "load.journal")}
        if args.postgres:
            storages["postgres"] = args.postgres
        if not args.json:
            print(f"{args.processes} processes x {args.trials} trials x {STEPS} reports, ASHA")
            print(f"{'storage':<9} {'seconds':>8} {'errors':>6} {'lost':>5} {'pruned':>6} "
                  f"{'records':>7} {'missing':>7} {'extra':>5}")
        for kind, storage in storages.items():
            result = run(storage, args.processes, args.trials)
            if args.json:
                print(json.dumps({"storage": kind, **result}))
            else:
                print(f"{kind:<9} {result['seconds']:>8.1f} {result['errors']:>6} "
                      f"{result['lost']:>5} {result['pruned']:>6} {result['records']:>7} "
                      f"{result['missing_records']:>7} {result['extra_records']:>5}")
                if result["first_error"]:
                    print(f"  first error: {result['first_error'][0]}")


if __name__ == "__main__":
    main()
