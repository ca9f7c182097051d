"""A worker process for the multi-process pruner tests, and the one way tests open a storage.

Run as a script, it loads a study, waits at a file barrier until every worker is ready, then
drives trials that all report at the same rungs at the same moment, and prints one JSON line
per decision. Imported (by ``conftest.py``), it gives :func:`make_storage`.

Usage::

    python tests/helpers/pruner_worker.py KIND URL STUDY PRUNER_JSON BARRIER_DIR WORKER N_WORKERS \
        PLAN_JSON

``PLAN_JSON`` is a list of trials, each a list of ``[step, value]`` reports.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import optuna
from optuna.storages import BaseStorage, InMemoryStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend

_BARRIER_TIMEOUT_S = 120.0


def make_storage(kind: str, url: str | None) -> BaseStorage:
    """Open the storage a ``(kind, url)`` pair names; every call opens it anew.

    ``kind`` is ``inmemory`` (``url`` ignored: a new, unshared storage), ``sqlite`` or
    ``postgres`` (an SQLAlchemy URL) or ``journal`` (a journal file path).
    """
    if kind == "inmemory":
        return InMemoryStorage()
    if kind == "journal":
        assert url is not None
        return JournalStorage(JournalFileBackend(url))
    assert url is not None
    engine_kwargs: dict[str, object] = {}
    if kind == "sqlite":
        # Several processes write at once: wait for SQLite's lock instead of failing.
        engine_kwargs = {"connect_args": {"timeout": 60}}
    return RDBStorage(url, engine_kwargs=engine_kwargs)


def _build_pruner(spec: dict) -> optuna.pruners.BasePruner:
    from lightning_hpo.pruners import ASHAPruner, HyperbandPruner

    kind = spec.pop("name")
    return {"asha": ASHAPruner, "hyperband": HyperbandPruner}[kind](**spec)


def _wait_for_all(barrier: Path, worker: int, n_workers: int) -> None:
    (barrier / f"ready-{worker}").touch()
    deadline = time.monotonic() + _BARRIER_TIMEOUT_S
    while len(list(barrier.glob("ready-*"))) < n_workers:
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker {worker}: the other workers never got ready")
        time.sleep(0.005)


def main(argv: list[str]) -> None:
    kind, url, study_name, pruner_json, barrier, worker, n_workers, plan_json = argv
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = make_storage(kind, url)
    study = optuna.load_study(
        study_name=study_name, storage=storage, pruner=_build_pruner(json.loads(pruner_json)),
        sampler=optuna.samplers.RandomSampler(seed=int(worker)),
    )
    plan: list[list[list[float]]] = json.loads(plan_json)
    trials = [study.ask() for _ in plan]  # ask first, so that all report together
    _wait_for_all(Path(barrier), int(worker), int(n_workers))
    alive = dict(enumerate(trials))
    for round_ in range(max(len(reports) for reports in plan)):
        for index, trial in list(alive.items()):
            if round_ >= len(plan[index]):
                continue
            step, value = plan[index][round_]
            trial.report(value, int(step))
            pruned = trial.should_prune()
            print(json.dumps({"worker": int(worker), "trial": trial.number, "step": int(step),
                              "value": value, "pruned": pruned}), flush=True)
            if pruned:
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                del alive[index]
    for index, trial in alive.items():
        study.tell(trial, plan[index][-1][1])


if __name__ == "__main__":
    main(sys.argv[1:])
