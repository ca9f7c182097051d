"""The trial and study objects each DDP rank's objective sees; shared by the API and the launcher.

:mod:`lightning_hpo.distributed` (``create_study`` / ``load_study`` for user scripts) and
:mod:`lightning_hpo.launch.worker` (the launcher's DDP slots) both run one trial on every rank:

* on rank 0 the objective gets a :class:`LeaderTrial`: the real Optuna trial, whose
  ``suggest_*`` also hand each value to the other ranks through a
  :class:`~lightning_hpo.distributed._channel.LeaderChannel`;
* on the other ranks, :class:`FollowerStudy.optimize` runs the objective once per trial of
  rank 0 with a :class:`FollowerTrial` whose ``suggest_*`` return rank 0's values; it never
  touches the storage.

How the values travel is :mod:`lightning_hpo.distributed._channel`'s business.

Example::

    >>> trial = FollowerTrial(3, {"lr": 0.1})   # what rank 1 sees of rank 0's trial 3
    >>> trial.suggest_float("lr", 1e-3, 1.0, log=True), trial.params, trial.should_prune()
    (0.1, {'lr': 0.1}, False)
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import optuna
from optuna.storages import BaseStorage

from lightning_hpo.distributed._channel import (
    ERROR_ACK_S,
    FollowerChannel,
    LeaderChannel,
    decode_error,
    encode_error,
)
from lightning_hpo.storage import StorageSpec

__all__ = ["FollowerStudy", "FollowerTrial", "LeaderTrial", "Objective", "share_segment"]

_logger = logging.getLogger(__name__)

Objective = Callable[[Any], "float | Sequence[float]"]


class LeaderMoved(Exception):
    """Rank 0 ended the trial a follower is in (it failed there) and sent the next message."""

    def __init__(self, message: list[Any]) -> None:
        super().__init__(message)
        self.message = message


# --------------------------------------------------------------------------------------------
# Rank 0.
# --------------------------------------------------------------------------------------------
class LeaderTrial:
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

    def share(self, name: str, value: Any) -> Any:
        """Hand a value that is not a hyperparameter (the launcher's segment) to the other
        ranks; returns it."""
        self._channel.share_param(name, value)
        return value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_trial", "_channel"):  # copy and pickle ask for
            raise AttributeError(name)  # these on an object whose __init__ has not run
        return getattr(self._trial, name)

    def __reduce__(self) -> Any:
        raise TypeError(
            "lightning_hpo.create_study's trials are for strategy='ddp', whose ranks re-run the "
            "script; a strategy that runs fit in processes started for it (ddp_spawn, "
            "ddp_fork, ddp_notebook) cannot take one along: create the study with "
            "optuna.create_study and a storage the processes share (sqlite:///study.db, a "
            "journal file), or use strategy='ddp'")

    def __repr__(self) -> str:
        return f"LeaderTrial(number={self._trial.number})"


# --------------------------------------------------------------------------------------------
# Ranks 1..N-1: follow rank 0, never touch the storage.
# --------------------------------------------------------------------------------------------
class FollowerTrial:
    """Stands in for rank 0's trial on another rank: ``suggest_*`` return rank 0's values.

    ``report`` and ``set_user_attr`` do nothing here (rank 0 records); ``should_prune`` is False
    (:class:`~lightning_hpo.PruningCallback` broadcasts rank 0's decision to every rank).

    Args:
        number: rank 0's trial number.
        params: the values rank 0 had suggested when it started this rank (the first trial,
            from the environment); ``None``: read each value from rank 0's mailbox.
    """

    def __init__(self, number: int, params: dict[str, Any] | None) -> None:
        self.number = number
        self.params: dict[str, Any] = {}
        self._preset = params
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
                raise LeaderMoved(message)
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

    def share(self, name: str, value: Any) -> Any:
        """Rank 0's value of ``name`` (see :meth:`LeaderTrial.share`); ``value`` is ignored.
        It is not one of the trial's ``params``."""
        shared = self._value(name)
        self.params.pop(name, None)
        return shared

    def report(self, value: float, step: int) -> None:
        """Rank 0 reports; nothing to do here."""

    def should_prune(self) -> bool:
        """Rank 0 decides; the callback broadcasts its decision."""
        return False

    def set_user_attr(self, key: str, value: Any) -> None:
        self.user_attrs[key] = value

    def __repr__(self) -> str:
        return f"FollowerTrial(number={self.number})"


def share_segment(trial: Any, segment: dict[str, Any]) -> dict[str, Any]:
    """Rank 0's training segment (``to_epoch``, ``checkpoint``), the same on every DDP rank."""
    return dict(trial.share("lightning_hpo:segment", segment))


def _leave_the_job(number: int, failure: BaseException) -> NoReturn:
    """End this rank's process after trial ``number`` raised ``failure`` here (handed to rank 0
    already): print it, then exit.

    Only the exit closes the connections rank 0 may be waiting on in a collective (destroying
    the process group does not: the model's DDP wrapper holds it). The status is 0, not 1:
    Lightning's launcher kills rank 0 at once when a rank it started exits with an error, before
    rank 0 could record the trial; rank 0 ends ``optimize`` with this error, so the job's
    command still exits with it.
    """
    rank = os.environ.get("RANK") or os.environ.get("LOCAL_RANK") or "?"
    traceback.print_exception(failure)
    print(f"lightning_hpo: trial {number} failed on rank {rank} (above); rank 0 records it and "
          "ends optimize with this error on every rank, so this rank leaves the job",
          file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(0)


#: ``Study`` methods that write what the script sets up (queued configurations, attributes):
#: a no-op on the other ranks, which run the same lines as rank 0 (on a storage file each rank
#: would otherwise queue a configuration of its own: one trial per rank).
_RANK0_WRITES = frozenset({"enqueue_trial", "add_trial", "add_trials", "set_user_attr",
                           "set_system_attr", "set_metric_names"})


def _rank0_writes(*args: Any, **kwargs: Any) -> None:
    """What a write of :data:`_RANK0_WRITES` does on a rank other than 0: nothing."""


class FollowerStudy:
    """What ``create_study`` returns on ranks other than 0: a loop that follows rank 0.

    After ``optimize`` returns, read-only attributes (``best_trial``, ``trials``...) are served by
    loading the study from its storage, when the storage is one other processes can open (a
    journal file, an SQLite file, a database server; not rank 0's memory). The writes a script
    makes before ``optimize`` (``enqueue_trial``, ``add_trial(s)``, ``set_user_attr``,
    ``set_system_attr``, ``set_metric_names``) do nothing here: rank 0 runs the same lines.

    Args:
        study_name: the study this rank's script names (checked against rank 0's), or None.
        storage: what the script passed: a storage spec (opened with
            :meth:`~lightning_hpo.storage.StorageSpec.open`, never created) or a storage object.
    """

    def __init__(self, study_name: str | None, storage: str | BaseStorage | None) -> None:
        self._study_name = study_name
        self._storage = storage
        self._loaded: optuna.Study | None = None

    def optimize(self, func: Objective, *args: Any, **kwargs: Any) -> None:
        """Run ``func`` once per trial of rank 0 until rank 0's ``optimize`` ends.

        After each trial this rank tells rank 0 how it ended here. A trial that raises here
        (not :class:`optuna.TrialPruned`) fails for every rank: this rank hands its error to
        rank 0, which records the trial FAIL with it and ends ``optimize`` with it, and this
        rank raises the error rank 0 sends back. When none comes within
        :data:`~lightning_hpo.distributed._channel.ERROR_ACK_S` seconds, rank 0 waits for this
        rank in a collective (a gradient all-reduce) that only this rank's exit ends: it prints
        its error and leaves the job (:func:`_leave_the_job`).

        Raises:
            What rank 0's ``optimize`` raised, when it ended with an exception.
        """
        message, preset = FollowerChannel.first_message()
        channel = FollowerChannel.current()
        while message[0] in ("trial", "end"):
            if message[0] == "end":  # a trial this rank has ended already (or never began)
                message = channel.receive()
                continue
            study_name, number = message[1], message[2]
            index = message[3] if len(message) > 3 else None
            if self._study_name is not None and study_name not in (None, self._study_name):
                raise RuntimeError(
                    f"lightning_hpo: rank 0 optimizes study '{study_name}' while this rank "
                    f"optimizes '{self._study_name}'; every rank must run the same script"
                )
            trial = FollowerTrial(number, preset)
            preset = None
            try:
                func(trial)
            except LeaderMoved as moved:  # rank 0 ended the trial before its fit began here
                channel.report_end(index, None)
                message = moved.message
                continue
            except optuna.TrialPruned:
                pass
            except Exception as failure:  # the trial fails on every rank: rank 0 records it
                channel.report_end(index, failure)
                # Rank 0 answers with the error optimize ends with (this one, or its own when
                # it failed first), unless it waits for this rank in a collective.
                first = channel.await_leader_error(ERROR_ACK_S)
                if first is not None:
                    message = ["error", encode_error(first)]
                    break
                channel.leave()
                _leave_the_job(trial.number, failure)
            channel.report_end(index, None)
            message = channel.receive()
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
        if name in _RANK0_WRITES:  # every rank runs the script: rank 0's call writes it once
            return _rank0_writes
        storage = self._storage
        if (
            storage is None
            or isinstance(storage, optuna.storages.InMemoryStorage)
            or (isinstance(storage, str) and StorageSpec(storage).kind == "sqlite-memory")
        ):
            raise AttributeError(
                f"study.{name} is only available on rank 0: the study is in rank 0's memory. "
                "Guard it with `if not lightning_hpo.is_follower():`, or use a storage URL."
            )
        if self._loaded is None:
            if isinstance(storage, str):
                storage = StorageSpec(storage).open(create=False)
            self._loaded = optuna.load_study(study_name=self._study_name, storage=storage)
        return getattr(self._loaded, name)
