"""Load: 4 processes x 100 trials x 10 reports with ASHA, on SQLite, a journal file and
PostgreSQL (directly, and through the gRPC proxy with ``--proxy``). Counts errors, lost trials
and missing rung records, times each storage, and on PostgreSQL counts the server's connections.

    python benchmarks/bench_load.py                                   # sqlite + journal
    python benchmarks/bench_load.py --postgres postgresql://u@127.0.0.1:5432/db
    python benchmarks/bench_load.py --postgres URL --proxy --processes 8   # direct vs proxy
    python benchmarks/bench_load.py --json                            # one JSON line per storage

With ``--proxy`` a ``python -m lightning_hpo.proxy URL`` process serves the same database and the
workers use ``grpc://127.0.0.1:PORT``. ``peak connections`` is the most client connections the
PostgreSQL server had to the benchmark's database at once (``pg_stat_activity``, read every
50 ms, the reader's own connection not counted): one pool per worker process directly, the
proxy's one pool through it.

Every worker asks trials, reports a noisy learning curve at steps 1..10 and asks the pruner
after each report, exactly as ``PruningCallback`` does; the rungs are 1, 3 and 9 (10 is the
maximum, where no decision is made). Afterwards the study must hold exactly
``processes x trials`` finished trials, and every trial that reported a rung's step must have
its record at that rung, with that value, and no other.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
from optuna.trial import TrialState

from lightning_hpo import ASHAPruner
from lightning_hpo.pruners import rung_records
from lightning_hpo.storage import open_storage

STEPS, LEVELS = 10, (1, 3, 9)


def _pruner() -> ASHAPruner:
    return ASHAPruner(min_resource=1, max_resource=STEPS, reduction_factor=3)


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


class PeakConnections:
    """Reads how many connections a PostgreSQL server has to one database, every 50 ms, in a
    thread; :attr:`peak` is the most seen (this reader's own connection not counted)."""

    def __init__(self, url: str) -> None:
        import sqlalchemy as sa

        self._engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
        self._query = sa.text("SELECT count(*) FROM pg_stat_activity "
                              "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        self._stop = threading.Event()
        self.peak = 0
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        with self._engine.connect() as conn:
            while not self._stop.is_set():
                self.peak = max(self.peak, int(conn.execute(self._query).scalar() or 0))
                conn.rollback()
                self._stop.wait(0.05)

    def __enter__(self) -> PeakConnections:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._engine.dispose()


@contextlib.contextmanager
def proxy(url: str) -> Iterator[str]:
    """A ``python -m lightning_hpo.proxy`` process serving ``url``; yields its grpc:// spec."""
    process = subprocess.Popen([sys.executable, "-m", "lightning_hpo.proxy", url, "--host",
                                "127.0.0.1", "--port", "0"], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    found = re.search(r"listening on (grpc://\S+)", line)
    try:
        if found is None:
            raise RuntimeError(f"the proxy did not start: {line}")
        yield found.group(1)
    finally:
        process.terminate()
        process.wait(timeout=30)


def run(
    storage: str, processes: int, trials: int, *, database: str | None = None
) -> dict[str, object]:
    """Create the study, run ``processes`` workers at once, and check the result.

    ``database``: the PostgreSQL URL behind ``storage`` (itself, or the proxy's), whose
    connections are counted; the study is created and checked there.
    """
    name = f"load-{time.time_ns()}"
    direct = database or storage
    optuna.create_study(study_name=name, storage=open_storage(direct), pruner=_pruner())
    watch = PeakConnections(database) if database else contextlib.nullcontext()
    with watch:
        start = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", storage, name,
                                   str(trials), str(seed)], stdout=subprocess.PIPE, text=True)
                 for seed in range(processes)]
        outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        seconds = time.perf_counter() - start
    errors = [e for out in outs for e in out["errors"]]
    peak = watch.peak if isinstance(watch, PeakConnections) else None
    return {"seconds": round(seconds, 2), "trials_per_s": round(processes * trials / seconds, 1),
            "peak_connections": peak, "errors": len(errors), "first_error": errors[:1],
            **_check(direct, name, processes * trials)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=4, metavar=("STORAGE", "STUDY", "TRIALS", "SEED"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--trials", type=int, default=100, help="trials per process")
    parser.add_argument("--postgres", help="a PostgreSQL URL to include")
    parser.add_argument("--proxy", action="store_true",
                        help="with --postgres: the same database through the gRPC proxy too")
    parser.add_argument("--only-postgres", action="store_true",
                        help="with --postgres: leave out SQLite and the journal file")
    parser.add_argument("--json", action="store_true", help="one JSON line per storage")
    args = parser.parse_args()
    if args.worker:
        storage, study, trials, seed = args.worker
        print(json.dumps(worker(storage, study, int(trials), int(seed))))
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        storages: dict[str, str] = {}
        if not (args.only_postgres and args.postgres):
            storages = {"sqlite": f"sqlite:///{Path(tmp) / 'load.db'}",
                        "journal": str(Path(tmp) / "load.journal")}
        if args.postgres:
            storages["postgres"] = args.postgres
        if not args.json:
            print(f"{args.processes} processes x {args.trials} trials x {STEPS} reports, ASHA")
            print(f"{'storage':<14} {'seconds':>8} {'trials/s':>8} {'peak conn':>9} "
                  f"{'errors':>6} {'lost':>5} {'pruned':>6} {'records':>7} {'missing':>7} "
                  f"{'extra':>5}")
        runs = [(kind, storage, storage if kind == "postgres" else None)
                for kind, storage in storages.items()]
        if args.proxy and args.postgres:
            runs.append(("postgres-proxy", "", args.postgres))
        for kind, storage, database in runs:
            if kind == "postgres-proxy":
                with proxy(args.postgres) as spec:
                    result = run(spec, args.processes, args.trials, database=database)
            else:
                result = run(storage, args.processes, args.trials, database=database)
            if args.json:
                print(json.dumps({"storage": kind, **result}))
            else:
                peak = "-" if result["peak_connections"] is None else result["peak_connections"]
                print(f"{kind:<14} {result['seconds']:>8.1f} {result['trials_per_s']:>8.1f} "
                      f"{peak:>9} {result['errors']:>6} {result['lost']:>5} "
                      f"{result['pruned']:>6} {result['records']:>7} "
                      f"{result['missing_records']:>7} {result['extra_records']:>5}")
                if result["first_error"]:
                    print(f"  first error: {result['first_error'][0]}")


if __name__ == "__main__":
    main()
