"""``create_study`` / ``load_study`` and :class:`DistributedStudy`: rank 0's side of one trial on
every DDP rank (the package docstring, :mod:`lightning_hpo.distributed`, tells the whole story)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import optuna
from optuna.storages import BaseStorage
from optuna.study import StudyDirection

from lightning_hpo.distributed._channel import EndOfTrial, LeaderChannel
from lightning_hpo.distributed._follower import FollowerStudy, LeaderTrial, Objective
from lightning_hpo.errors import ConfigError
from lightning_hpo.storage import StorageSpec

__all__ = [
    "DistributedStudy",
    "create_study",
    "is_follower",
    "load_study",
]

_logger = logging.getLogger(__name__)


def is_follower() -> bool:
    """True in a process that a DDP launcher started for a rank other than global rank 0.

    Launchers set ``RANK`` (torchrun) or ``LOCAL_RANK``/``NODE_RANK`` (Lightning's ``ddp``).

    Example::

        >>> from lightning_hpo import is_follower
        >>> import os; os.environ.pop("LOCAL_RANK", None); is_follower()
        False
    """
    return any(int(os.environ.get(key, "0")) != 0 for key in ("RANK", "LOCAL_RANK", "NODE_RANK"))


class DistributedStudy(optuna.Study):
    """An :class:`optuna.Study` whose ``optimize`` runs each trial on every DDP rank.

    Get one from :func:`create_study` or :func:`load_study`; on rank 0 it is a full Optuna study
    (the only process that writes to the storage), on other ranks those functions return a
    follower instead. ``optimize`` takes Optuna's arguments except ``n_jobs`` (one trial at a
    time: the ranks train it together).
    """

    def optimize(  # type: ignore[override]
        self,
        func: Objective,
        n_trials: int | None = None,
        timeout: float | None = None,
        n_jobs: int = 1,
        catch: Iterable[type[Exception]] | type[Exception] = (),
        callbacks: Iterable[Callable[[optuna.Study, optuna.trial.FrozenTrial], None]]
        | None = None,
        gc_after_trial: bool = False,
        show_progress_bar: bool = False,
    ) -> None:
        if n_jobs != 1:
            raise ValueError(
                f"The value of `n_jobs` is {n_jobs}, but must be `n_jobs == 1` for a "
                "DistributedStudy: all ranks train one trial together."
            )
        channel = LeaderChannel()
        broken: list[BaseException] = []  # a failure that ends optimize, whatever `catch` says

        def shared_objective(trial: optuna.trial.Trial) -> float | Sequence[float]:
            channel.begin_trial(trial.number, self.study_name)
            try:
                result = func(LeaderTrial(trial, channel))
            except optuna.TrialPruned:
                _end_or_stop(self, channel.end_trial(failed=False), trial.number, None, broken)
                raise
            except Exception as error:
                _end_or_stop(self, channel.end_trial(failed=True), trial.number, error, broken)
                raise
            _end_or_stop(self, channel.end_trial(failed=False), trial.number, None, broken)
            return result

        try:
            super().optimize(
                shared_objective,
                n_trials=n_trials,
                timeout=timeout,
                catch=catch,
                callbacks=callbacks,
                gc_after_trial=gc_after_trial,
                show_progress_bar=show_progress_bar,
            )
            if broken:  # caught by `catch`, but the ranks cannot go on together
                raise broken[0]
        except BaseException as error:
            try:
                channel.finish(error)
            except Exception:  # a rank already gone (Lightning kills them on Ctrl-C): keep `error`
                _logger.debug("could not tell the other ranks that optimize failed", exc_info=True)
            raise
        channel.finish()


def _end_or_stop(study: optuna.Study, end: EndOfTrial, number: int, error: Exception | None,
                 broken: list[BaseException]) -> None:
    """After trial ``number`` (rank 0's ``error``, if it raised): raise the error of another rank
    it failed on, which is the trial's reason (rank 0 only saw its process group break); and
    where a rank failed or is left in a collective, stop ``optimize`` on every rank after this
    trial (``broken``): the ranks' collectives no longer match, so no next trial could train."""
    if end.error is not None:
        failure = end.error
        if hasattr(failure, "add_note"):  # Python 3.11+
            failure.add_note(f"lightning_hpo: raised on rank {end.failed_rank} in trial {number}; "
                             "optimize ends on every rank")
        broken.append(failure)
        study.stop()
        if isinstance(failure, Exception):
            raise failure from error
        raise RuntimeError(f"rank {end.failed_rank}: {failure!r}") from error
    if error is not None and not end.ended:  # the others wait in a collective rank 0 left
        broken.append(error)
        study.stop()


def _resolve_storage(storage: str | os.PathLike[str] | BaseStorage | None, *, create: bool
                     ) -> BaseStorage:
    """One storage object for both Optuna's ``create_study`` and our subclass.

    A string (or a path, a journal file's) is a storage spec opened as the launcher opens it
    (:meth:`~lightning_hpo.storage.StorageSpec.open`): a journal file path or an RDB URL, with
    SQLite's lock wait and the retry on a schema-creation race; a bad one raises
    :class:`~lightning_hpo.ConfigError` with the password masked.
    """
    if storage is None:
        return optuna.storages.InMemoryStorage()
    if isinstance(storage, os.PathLike):
        storage = os.fspath(storage)
    if isinstance(storage, str):
        return StorageSpec(storage).open(create=create)
    if not isinstance(storage, BaseStorage):  # Optuna's AttributeError came at first use
        shown = repr(storage) if len(repr(storage)) <= 60 else repr(storage)[:57] + "..."
        raise ConfigError("storage", (
            f"is {shown} ({type(storage).__name__}), but must be a journal file path, an RDB "
            "URL (sqlite:///study.db), an Optuna storage object or None (in memory)"))
    return storage


def _as_distributed(study: optuna.Study, storage: BaseStorage) -> DistributedStudy:
    return DistributedStudy(
        study_name=study.study_name, storage=storage, sampler=study.sampler, pruner=study.pruner
    )


def create_study(
    *,
    storage: str | os.PathLike[str] | BaseStorage | None = None,
    sampler: optuna.samplers.BaseSampler | None = None,
    pruner: optuna.pruners.BasePruner | None = None,
    study_name: str | None = None,
    direction: Literal["minimize", "maximize"] | StudyDirection | None = None,
    load_if_exists: bool = False,
    directions: Sequence[Literal["minimize", "maximize"] | StudyDirection] | None = None,
) -> DistributedStudy | Any:
    """:func:`optuna.create_study` for objectives that train with ``strategy="ddp"``.

    Takes Optuna's arguments. On global rank 0 it creates (or loads) the study and returns a
    :class:`DistributedStudy`; on the other ranks it touches no storage and returns a follower
    whose ``optimize`` trains rank 0's trials. See the module docstring for a full example.
    Its ``optimize`` takes Optuna's arguments except ``n_jobs``, which must be 1 even without
    DDP (rank 0's raises ``ValueError`` otherwise): for threads in one process, use Optuna's
    own :func:`optuna.create_study`.

    ``storage`` is a storage object, None (in memory), or a spec as the launcher takes it: an
    RDB URL (``sqlite:///hpo.db``, ``postgresql://...``) or a journal file path
    (``runs/hpo.journal``, a string or a :class:`pathlib.Path`); a missing file is created.

    Raises:
        ConfigError: ``storage: cannot open <spec, password masked>: <reason>``, or a
            ``storage`` of another type (a number, bytes).

    Example::

        >>> from lightning_hpo import create_study
        >>> study = create_study(study_name="doc", direction="minimize")
        >>> study.optimize(lambda trial: trial.suggest_float("x", -1.0, 1.0) ** 2, n_trials=3)
        >>> type(study).__name__, len(study.trials)
        ('DistributedStudy', 3)
    """
    storage = os.fspath(storage) if isinstance(storage, os.PathLike) else storage
    if is_follower():
        return FollowerStudy(study_name, storage)
    resolved = _resolve_storage(storage, create=True)
    study = optuna.create_study(
        storage=resolved,
        sampler=sampler,
        pruner=pruner,
        study_name=study_name,
        direction=direction,
        load_if_exists=load_if_exists,
        directions=directions,
    )
    return _as_distributed(study, resolved)


def load_study(
    *,
    study_name: str | None,
    storage: str | os.PathLike[str] | BaseStorage,
    sampler: optuna.samplers.BaseSampler | None = None,
    pruner: optuna.pruners.BasePruner | None = None,
) -> DistributedStudy | Any:
    """:func:`optuna.load_study` for objectives that train with ``strategy="ddp"``.

    A string ``storage`` is opened as in :func:`create_study`, except that a missing journal or
    SQLite file is an error, not a new empty file.

    Raises:
        ConfigError: ``storage: cannot open <spec>: no SQLite database at <path>`` and the like.
        KeyError: no study of that name is there (Optuna's error, naming the studies that are).

    Example::

        study = lightning_hpo.load_study(study_name="lenet", storage="sqlite:///hpo.db")
    """
    storage = os.fspath(storage) if isinstance(storage, os.PathLike) else storage
    if is_follower():
        return FollowerStudy(study_name, storage)
    resolved = _resolve_storage(storage, create=False)
    try:
        study = optuna.load_study(
            study_name=study_name, storage=resolved, sampler=sampler, pruner=pruner
        )
    except KeyError:  # Optuna's own words: 'Record does not exist.'
        names = sorted(optuna.get_all_study_names(resolved))
        where = StorageSpec(storage).masked if isinstance(storage, str) else type(
            storage).__name__
        raise KeyError(f"no study named {study_name!r} in {where}; studies there: "
                       f"{', '.join(names) or 'none'}") from None
    return _as_distributed(study, resolved)
