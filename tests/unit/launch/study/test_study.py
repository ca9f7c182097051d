"""The launcher's queue (``lightning_hpo.launch.study.creation``): ``open_study`` queues exactly
``stop.n_trials`` trials, in one write, on every storage the launcher opens; an interruption
while it writes leaves all of the queue or none of it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.storages import JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from lightning_hpo.launch.config import parse_config
from lightning_hpo.launch.study.creation import open_study
from lightning_hpo.storage import open_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)

KINDS = ["journal", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def _url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "postgres":
        return str(request.getfixturevalue("postgres_server").new_database("queue"))
    return {"journal": str(tmp_path / "t.journal"), "sqlite": f"sqlite:///{tmp_path}/t.db"}[kind]


def _cfg(url: str, n_trials: int, initial: list[dict[str, Any]] | None = None) -> Any:
    return parse_config({"study": "q", "model": {"name": "lenet"}, "storage": url,
                         "space": {"lr": {"loguniform": [0.01, 1.0]}},
                         "pruner": {"name": "asha", "max_resource": 3},
                         "initial": initial or [], "stop": {"n_trials": n_trials}})


def _queue(url: str) -> list[tuple[int, TrialState, dict[str, Any]]]:
    study = optuna.load_study(study_name="q", storage=open_storage(url, create=False))
    return [(t.number, t.state, t.system_attrs.get("fixed_params"))
            for t in study.get_trials(deepcopy=False)]


@pytest.mark.parametrize("kind", KINDS)
def test_the_queue_is_exactly_n_trials_and_tops_up_without_duplicates(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = _url(kind, tmp_path, request)
    _, created = open_study(_cfg(url, 5, [{"lr": 0.1}, {"lr": 0.2}]), open_storage(url))
    assert created
    assert _queue(url) == [(0, TrialState.WAITING, {"lr": 0.1}),
                           (1, TrialState.WAITING, {"lr": 0.2})] + [
        (n, TrialState.WAITING, {}) for n in range(2, 5)]
    study, created = open_study(_cfg(url, 9, [{"lr": 0.1}, {"lr": 0.2}]), open_storage(url))
    assert not created
    assert _queue(url)[:2] == [(0, TrialState.WAITING, {"lr": 0.1}),
                               (1, TrialState.WAITING, {"lr": 0.2})]  # not queued again
    assert _queue(url)[2:] == [(n, TrialState.WAITING, {}) for n in range(2, 9)]
    ids = [t._trial_id for t in study.get_trials(deepcopy=False)]
    assert len(set(ids)) == 9
    open_study(_cfg(url, 9), open_storage(url))  # the same budget again: nothing more
    assert len(_queue(url)) == 9
    trial = study.ask()  # a queued ticket is what ask hands out, with its fixed parameters
    assert (trial.number, trial.suggest_float("lr", 0.01, 1.0, log=True)) == (0, 0.1)


def _interrupt_at(call: int, method: Callable[..., Any]) -> Callable[..., Any]:
    """``method``, raising KeyboardInterrupt (Ctrl-C) instead of its ``call``-th call."""
    calls = [0]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == call:
            raise KeyboardInterrupt
        return method(*args, **kwargs)

    return wrapped


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("at", [1, 2, 5])
def test_ctrl_c_while_queueing_leaves_all_of_the_queue_or_none(
    kind: str, at: int, tmp_path: Path, request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C at the ``at``-th write of a trial: one ``enqueue_trial`` at a time, the trials
    before it stayed queued, and the study then refused the budget meant (``stop.n_trials: is
    10, but study 'q' holds 2429 trials already``)."""
    url = _url(kind, tmp_path, request)
    open_study(_cfg(url, 1), open_storage(url))  # the study, with one ticket
    # Where each trial is written: a journal append, a trial row in the transaction.
    if kind == "journal":
        owner, name = JournalFileBackend, "append_logs"
    else:
        owner, name = RDBStorage, "_get_prepared_new_trial"
    monkeypatch.setattr(owner, name, _interrupt_at(at, getattr(owner, name)))
    interrupted = False
    try:
        open_study(_cfg(url, 40), open_storage(url))
    except KeyboardInterrupt:
        interrupted = True
    monkeypatch.undo()
    # A journal's queue is one append: a later call is never made (the queue is all there).
    assert interrupted or (kind == "journal" and at > 1)
    assert len(_queue(url)) == (1 if interrupted else 40)
    if interrupted:  # nothing of the interrupted top-up holds the study: the meant budget runs
        open_study(_cfg(url, 10), open_storage(url))
        assert [n for n, _, _ in _queue(url)] == list(range(10))


def test_the_journal_lines_are_enqueue_trials(tmp_path: Path) -> None:
    """One append writes the lines ``enqueue_trial`` writes one by one (but the worker id)."""
    import json

    lines = []
    for name, batch in (("one.journal", False), ("all.journal", True)):
        storage = JournalStorage(JournalFileBackend(str(tmp_path / name)))
        study = optuna.create_study(study_name="q", storage=storage)
        queue: list[dict[str, Any]] = [{"lr": 0.5}, {}, {}]
        if batch:
            from lightning_hpo._optuna import enqueue_trials, study_id_of

            enqueue_trials(storage, study_id_of(study), queue)
        else:
            for params in queue:
                study.enqueue_trial(params)
        read = [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]
        lines.append([{k: v for k, v in log.items() if k != "worker_id"} for log in read])
    assert lines[0] == lines[1]
