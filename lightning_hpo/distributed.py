"""One trial on every DDP rank: ``create_study`` / ``load_study`` for ``strategy="ddp"``.

Why this exists. With ``Trainer(strategy="ddp")`` Lightning starts ranks 1..N-1 by re-running the
user's script. Each re-run reaches ``study.optimize`` and, with a plain Optuna study, asks for a
trial of its own: the ranks then train *different* hyperparameters in one training run, and the
study gets N times too many trials. ``ddp_spawn`` avoids the re-run but pays a process spawn per
trial.

The fix is one rule: **rank 0 leads, the other ranks follow.** Create (or load) the study with
:func:`create_study` / :func:`load_study`, which take exactly Optuna's arguments:

* on global rank 0 they return a :class:`DistributedStudy`, a real :class:`optuna.Study` whose
  :meth:`~DistributedStudy.optimize` hands every suggested value to the other ranks;
* on every other rank they return a follower that never touches the storage: its ``optimize``
  runs the same objective once per trial of rank 0, and each ``trial.suggest_*`` returns the value
  rank 0 suggested.

How values travel (``lightning_hpo/_ddp_channel.py`` has the details). The trial whose ``fit``
launches the other ranks reaches them through their environment; later trials, each suggested
value, the end of each ``optimize`` call and an error that ends one travel through a small mailbox
rank 0 hosts. So a script may call ``optimize`` any number of times, on one study or several, and
suggest every hyperparameter before ``trainer.fit``, as any objective that builds its model from
them does. When rank 0's ``optimize`` raises, the other ranks raise the same exception.

Example (``examples/ddp_objective.py`` is the runnable version)::

    import lightning as L
    import lightning_hpo as hpo

    def objective(trial):
        model = hpo.LeNet(lr=trial.suggest_float("lr", 1e-2, 1.0, log=True))
        pruning = hpo.PruningCallback(trial, monitor="validation_error")
        trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=9,
                            callbacks=[pruning])
        trainer.fit(model, datamodule=hpo.DigitsDataModule(batch_size=64))
        pruning.raise_if_pruned()
        return trainer.callback_metrics["validation_error"].item()

    study = hpo.create_study(storage="sqlite:///ddp.db", study_name="ddp",
                             load_if_exists=True, pruner=hpo.ASHAPruner(max_resource=9))
    study.optimize(objective, n_trials=4)   # exactly 4 trials, whatever the number of ranks
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import optuna
from optuna.storages import BaseStorage
from optuna.study import StudyDirection

from lightning_hpo._ddp_channel import (
    FollowerChannel,
    LeaderChannel,
    LeaderError,
    decode_error,
)

__all__ = [
    "DistributedStudy",
    "LeaderError",
    "create_study",
    "global_rank",
    "is_follower",
    "load_study",
]

_logger = logging.getLogger(__name__)

Objective = Callable[[Any], "float | Sequence[float]"]


def global_rank() -> int:
    """This process's global rank as the launchers set it (``RANK``), else 0.

    Processes launched by Lightning for ``strategy="ddp"`` get ``LOCAL_RANK``/``NODE_RANK``
    instead; :func:`is_follower` looks at those too.
    """
    return int(os.environ.get("RANK", "0"))


def is_follower() -> bool:
    """True in a process that a DDP launcher started for a rank other than global rank 0.

    Example::

        >>> import os; os.environ.pop("LOCAL_RANK", None); is_follower()
        False
    """
    return any(int(os.environ.get(key, "0")) != 0 for key in ("RANK", "LOCAL_RANK", "NODE_RANK"))


class _LeaderMoved(Exception):
    """Rank 0 ended the trial a follower is in (it failed there) and sent the next message."""

    def __init__(self, message: list[Any]) -> None:
        super().__init__(message)
        self.message = message


# --------------------------------------------------------------------------------------------
# Rank 0: a real optuna.Study whose trials share what they suggest.
# --------------------------------------------------------------------------------------------
class _LeaderTrial:
    """An :class:`optuna.trial.Trial` that hands each suggested value to the other ranks.

    Everything but ``suggest_*`` is the wrapped trial's own (``report``, ``should_prune``,
    ``set_user_attr``, ``number``, ``params``...).
    """

    def __init__(self, trial: optuna.trial.Trial, channel: LeaderChannel) -> None:
        self._trial = trial
        self._channel = channel

    def suggest_float(self, name: str, low: float, high: float, **kwargs: Any) -> float:
        value = self._trial.suggest_float(name, low, high, **kwargs)
        self._channel.share_param(name, value)
        return value

    def suggest_int(self, name: str, low: int, high: int, **kwargs: Any) -> int:
        value = self._trial.suggest_int(name, low, high, **kwargs)
        self._channel.share_param(name, value)
        return value

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        value = self._trial.suggest_categorical(name, choices)
        self._channel.share_param(name, value)
        return value

    def __getattr__(self, name: str) -> Any:
        return getattr(self._trial, name)

    def __repr__(self) -> str:
        return f"_LeaderTrial(number={self._trial.number})"


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

        def shared_objective(trial: optuna.trial.Trial) -> float | Sequence[float]:
            channel.begin_trial(trial.number, self.study_name)
            return func(_LeaderTrial(trial, channel))

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
        except BaseException as error:
            try:
                channel.finish(error)
            except Exception:  # a rank already gone (Lightning kills them on Ctrl-C): keep `error`
                _logger.debug("could not tell the other ranks that optimize failed", exc_info=True)
            raise
        channel.finish()


# --------------------------------------------------------------------------------------------
# Other ranks: follow rank 0, never touch the storage.
# --------------------------------------------------------------------------------------------
class _FollowerTrial:
    """Stands in for rank 0's trial on another rank: ``suggest_*`` return rank 0's values.

    ``report`` and ``set_user_attr`` do nothing here (rank 0 records); ``should_prune`` is False
    (:class:`~lightning_hpo.PruningCallback` broadcasts rank 0's decision to every rank).
    """

    def __init__(self, number: int, params: dict[str, Any] | None) -> None:
        self.number = number
        self.params: dict[str, Any] = {}
        self._preset = params  # the first trial's values, from the environment; else broadcast
        self.user_attrs: dict[str, Any] = {}

    def _value(self, name: str) -> Any:
        if self._preset is not None:
            if name not in self._preset:
                raise RuntimeError(
                    f"lightning_hpo: rank 0 had not suggested '{name}' when it started the other "
                    f"ranks (it had: {sorted(self._preset) or 'nothing'}); suggest every "
                    "hyperparameter before trainer.fit"
                )
            value = self._preset[name]
        else:
            message = FollowerChannel.current().receive()
            if message[0] != "param":
                raise _LeaderMoved(message)
            if message[1] != name:
                raise RuntimeError(
                    f"lightning_hpo: rank 0 suggested '{message[1]}' where this rank suggests "
                    f"'{name}'; every rank must run the same objective"
                )
            value = message[2]
        self.params[name] = value
        return value

    def suggest_float(self, name: str, low: float, high: float, **kwargs: Any) -> float:
        return float(self._value(name))

    def suggest_int(self, name: str, low: int, high: int, **kwargs: Any) -> int:
        return int(self._value(name))

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        return self._value(name)

    def report(self, value: float, step: int) -> None:
        """Rank 0 reports; nothing to do here."""

    def should_prune(self) -> bool:
        """Rank 0 decides; the callback broadcasts its decision."""
        return False

    def set_user_attr(self, key: str, value: Any) -> None:
        self.user_attrs[key] = value

    def __repr__(self) -> str:
        return f"_FollowerTrial(number={self.number})"


class _FollowerStudy:
    """What :func:`create_study` returns on ranks other than 0: a loop that follows rank 0.

    After ``optimize`` returns, read-only attributes (``best_trial``, ``trials``...) are served by
    loading the study from its storage, when the storage is one other processes can open.
    """

    def __init__(self, study_name: str | None, storage: str | BaseStorage | None) -> None:
        self._study_name = study_name
        self._storage = storage
        self._loaded: optuna.Study | None = None

    def optimize(self, func: Objective, *args: Any, **kwargs: Any) -> None:
        """Run ``func`` once per trial of rank 0 until rank 0's ``optimize`` ends.

        Raises what rank 0's ``optimize`` raised, when it ended with an exception.
        """
        message, preset = FollowerChannel.first_message()
        while message[0] == "trial":
            _, study_name, number = message
            if self._study_name is not None and study_name not in (None, self._study_name):
                raise RuntimeError(
                    f"lightning_hpo: rank 0 optimizes study '{study_name}' while this rank "
                    f"optimizes '{self._study_name}'; every rank must run the same script"
                )
            trial = _FollowerTrial(number, preset)
            preset = None
            try:
                func(trial)
            except _LeaderMoved as moved:
                message = moved.message
                continue
            except optuna.TrialPruned:
                pass
            except Exception as failure:  # rank 0 records the failure and says whether to go on
                _logger.debug("trial %d failed on this rank: %r", trial.number, failure)
            message = FollowerChannel.current().receive()
        if message[0] == "error":
            error = decode_error(message[1])
            if hasattr(error, "add_note"):  # Python 3.11+
                error.add_note("lightning_hpo: raised by rank 0's optimize; this rank follows it")
            raise error
        if message[0] != "stop":
            raise RuntimeError(f"lightning_hpo: unexpected message from rank 0: {message!r}")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._storage is None or isinstance(self._storage, optuna.storages.InMemoryStorage):
            raise AttributeError(
                f"study.{name} is only available on rank 0: the study is in rank 0's memory. "
                "Guard it with `if not lightning_hpo.is_follower():`, or use a storage URL."
            )
        if self._loaded is None:
            self._loaded = optuna.load_study(study_name=self._study_name, storage=self._storage)
        return getattr(self._loaded, name)


def _resolve_storage(storage: str | BaseStorage | None) -> BaseStorage:
    """One storage object for both Optuna's ``create_study`` and our subclass."""
    if storage is None:
        return optuna.storages.InMemoryStorage()
    if isinstance(storage, str):
        return optuna.storages.RDBStorage(storage)
    return storage


def _as_distributed(study: optuna.Study, storage: BaseStorage) -> DistributedStudy:
    return DistributedStudy(
        study_name=study.study_name, storage=storage, sampler=study.sampler, pruner=study.pruner
    )


def create_study(
    *,
    storage: str | BaseStorage | None = None,
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

    Example::

        study = lightning_hpo.create_study(storage="sqlite:///hpo.db", study_name="lenet",
                                           load_if_exists=True, pruner=ASHAPruner())
        study.optimize(objective, n_trials=20)
    """
    if is_follower():
        return _FollowerStudy(study_name, storage)
    resolved = _resolve_storage(storage)
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
    storage: str | BaseStorage,
    sampler: optuna.samplers.BaseSampler | None = None,
    pruner: optuna.pruners.BasePruner | None = None,
) -> DistributedStudy | Any:
    """:func:`optuna.load_study` for objectives that train with ``strategy="ddp"``.

    Example::

        study = lightning_hpo.load_study(study_name="lenet", storage="sqlite:///hpo.db")
    """
    if is_follower():
        return _FollowerStudy(study_name, storage)
    resolved = _resolve_storage(storage)
    study = optuna.load_study(
        study_name=study_name, storage=resolved, sampler=sampler, pruner=pruner
    )
    return _as_distributed(study, resolved)
