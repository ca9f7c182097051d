"""``PruningCallback``: the bridge between a Lightning ``Trainer`` and an Optuna trial.

The pruner decides, the callback carries: at the end of every training epoch in which ``fit``
validated, rank 0 reads the monitored metric, reports it to the trial at step ``epoch + 1``
(epochs completed, counted from 1), asks the study's pruner, and shares the answer with every
rank through the strategy's ``broadcast``; all ranks then stop after the same epoch. One code
path serves one device and DDP.

Reported at the epoch's end, the value is the epoch's last validation (several with
``val_check_interval < 1``), and a metric the training step logs per epoch
(``on_epoch=True``) is there too. A ``validate()`` outside ``fit`` reports nothing, and nor do
an epoch after the pruner said stop (``Trainer(min_epochs=...)`` trains on) and a
``fast_dev_run`` (a smoke test, which Lightning's EarlyStopping and ModelCheckpoint skip too:
its values would stay in the pruner's rung records; a monitor it never logs still fails it).

A model trained by steps (``max_steps`` and ``val_check_interval`` in batches, an epoch longer
than the search can wait for) takes ``resource="step"``: each validation in ``fit`` is reported
at ``trainer.global_step`` (optimizer steps done), the pruner's rungs count steps, and a pruned
trial stops right after that validation, mid-epoch. The first callback to fit in a study
writes which it counts (:data:`~lightning_hpo.schema.RESOURCE_ATTR`), for the report to name
them; a callback of the other resource in that study is refused when its fit starts.

An objective that stops training on the pruner's word but forgets
:meth:`PruningCallback.raise_if_pruned` returns a value, and Optuna records the stopped trial
COMPLETE, to be compared with trials that trained every epoch. The next ``fit`` with a
``PruningCallback`` in the same process says so, once (one read of each stopped trial's state).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any, Literal

import lightning as L
import optuna
from lightning.pytorch.trainer.states import TrainerFn
from optuna.storages import BaseStorage
from optuna.trial import TrialState
from typing_extensions import override

from lightning_hpo._optuna import storage_of, study_id_of, trial_id_of, unwrap_storage
from lightning_hpo.errors import ConfigError
from lightning_hpo.schema import ATTR, RESOURCE_ATTR, with_objective_values

__all__ = ["PruningCallback"]

_logger = logging.getLogger(__name__)

#: Trials a callback of this process stopped, not yet seen ended: (storage, trial id, number).
_stopped: list[tuple[Any, int, int]] = []
_lock = threading.Lock()  # _stopped and _resources: study.optimize(n_jobs=...) uses threads
#: What each study's reported steps count, as read or written by this process (_note_resource):
#: storage -> {study id: resource}.
_resources: weakref.WeakKeyDictionary[BaseStorage, dict[int, str]] = weakref.WeakKeyDictionary()
#: The last step each trial reported through a callback of this process, and that callback's
#: id: trial -> (step, id(callback)). Every DDP rank keeps the same (each rank's callback runs
#: ``_decide`` at the same steps). FixedTrial and FrozenTrial replays record nothing: not kept.
_reported: weakref.WeakKeyDictionary[Any, tuple[int, int]] = weakref.WeakKeyDictionary()
_told = False  # the forgotten raise_if_pruned was said (once a process)
_hinted = False  # "validated often, judged once: resource='step'" was said (once a process)

#: What a ``PruningCallback`` reports at, and what the pruner's rungs count.
RESOURCES = {"epoch": "the end of each epoch that validated, at epochs completed",
             "step": "each validation, at optimizer steps done (trainer.global_step)"}


class PruningCallback(L.Callback):
    """Report a metric to an Optuna trial every epoch and stop training when the pruner says so.

    Works with any ``Trainer``: one device, several devices with ``strategy="ddp"`` (create the
    study with :func:`lightning_hpo.create_study` so every rank trains the same trial), CPU or
    GPU. Only global rank 0 writes to the storage: the reported values, and for a pruned trial
    the epoch it stopped at in the user attribute ``pruned_at_epoch``
    (:attr:`lightning_hpo.schema.ATTR.PRUNED_AT_EPOCH`).

    Args:
        trial: the trial of the objective (an :class:`optuna.trial.Trial`, or what
            :func:`lightning_hpo.create_study`'s ``optimize`` passes to the objective; a
            ``FixedTrial`` replay reports nothing). One callback per trial and ``Trainer``; a
            trial's steps are reported once, so a later fit of it from a step already reported
            (with this callback or another) is refused when it starts, and so is a trial that
            already ended.
        monitor: a metric the LightningModule logs in validation (or per training epoch), e.g.
            ``"validation_error"``; in a study with several objectives
            (``create_study(directions=[...])``), a list of them, one per objective in the
            study's order, e.g. ``["validation_error", "latency_ms"]``. Their values are then
            written each epoch as the trial user attribute ``objective_values``
            (:func:`lightning_hpo.schema.objective_curve`; Optuna's ``trial.report`` refuses
            such a study) and the study's pruner decides on them: :class:`ASHAPruner` and
            :class:`HyperbandPruner` rank by Pareto fronts; Optuna's own pruners are refused
            when ``fit`` starts (they read only ``report``'s values), ``NopPruner`` never stops
            a trial. A value logged once (a parameter count) stays in ``callback_metrics`` and
            counts every epoch. An epoch before a monitored metric is first logged is not
            reported (said once); a fit from scratch that never logs it raises
            :class:`~lightning_hpo.errors.ConfigError` at its end, naming the metrics logged.
        resource: what a report's step counts, and so the pruner's ``min_resource`` and
            ``max_resource``: ``"epoch"`` (default; reported at the end of each epoch that
            validated) or ``"step"`` (reported at each validation, at ``trainer.global_step``,
            for a model trained by steps; a pruned trial stops after that validation, and its
            user attribute is ``pruned_at_step``). One study counts one of them: the first
            callback's, written as the study's
            :data:`~lightning_hpo.schema.RESOURCE_ATTR`, which the report reads; ``fit`` with
            the other raises :class:`~lightning_hpo.errors.ConfigError`.

    Example::

        def objective(trial):
            model = LeNet(lr=trial.suggest_float("lr", 1e-2, 1.0, log=True))
            pruning = PruningCallback(trial, monitor="validation_error")
            trainer = L.Trainer(max_epochs=27, callbacks=[pruning])
            trainer.fit(model, datamodule=DigitsDataModule(batch_size=64))
            pruning.raise_if_pruned()
            return trainer.callback_metrics["validation_error"].item()

        # trained by steps: rungs at 200, 600 and 1800 optimizer steps
        pruner = ASHAPruner(min_resource=200, max_resource=1800, reduction_factor=3)
        study = optuna.create_study(pruner=pruner)
        pruning = PruningCallback(trial, monitor="validation_error", resource="step")
        trainer = L.Trainer(max_steps=1800, val_check_interval=200, callbacks=[pruning])
    """

    def __init__(
        self, trial: optuna.trial.Trial | Any, monitor: str | Sequence[str] = "validation_error",
        resource: Literal["epoch", "step"] = "epoch",
    ) -> None:
        super().__init__()
        missing = [name for name in ("report", "should_prune")
                   if not callable(getattr(trial, name, None))]
        if missing:
            raise ConfigError("trial", (
                f"is {_shown(trial)}, which has no {' or '.join(missing)}: give the trial "
                "Optuna passes to the objective (def objective(trial): ... "
                "PruningCallback(trial, monitor=...))"))
        if resource not in RESOURCES:
            raise ConfigError("resource", f"is {resource!r}; allowed: " + "; ".join(
                f"'{name}' (reports at {what})" for name, what in RESOURCES.items()))
        self.trial = trial
        self.monitor = monitor
        self.resource = resource
        self._monitors = _monitor_names(monitor)
        self.pruned_at_epoch: int | None = None
        self.pruned_at_step: int | None = None
        self._validated = False  # fit validated during the current epoch
        self._reported = 0  # steps reported during this fit
        self._validations = 0  # validations during this fit
        self._last_step = 0  # the last step reported (resource="step")
        self._pid = os.getpid()  # a fit in processes started for it works on copies (spawn)
        self._skipped = False  # a validation that logged nothing new was not reported
        self._judged_dev: int | None = None  # the last step fast_dev_run validated (unreported)
        self._judged: int | None = None  # the last step this fit's validations were looked at
        self._from_start = True  # this fit trains from scratch (no checkpoint's steps)
        self._seen: tuple[Any, ...] | None = None  # the monitored metrics' objects last reported
        self._fit_here = False  # a fit of this process ran this object's hooks

    @property
    def pruned(self) -> bool:
        """True once the pruner stopped this trial."""
        return self.pruned_at_epoch is not None or self.pruned_at_step is not None

    @override
    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.pruned_at_epoch = self.pruned_at_step = None
        self._validated = False
        self._reported = self._validations = self._last_step = 0
        self._skipped = False
        self._judged = None
        self._judged_dev = None
        self._from_start = True
        self._seen = None
        self._fit_here = True
        twin = next((callback for callback in getattr(trainer, "callbacks", ())  # set by fit
                     if isinstance(callback, PruningCallback) and callback is not self
                     and callback.trial is self.trial), None)
        if twin is not None:  # every rank has the same callbacks: each raises, none waits
            raise ConfigError("callbacks", (
                f"hold two PruningCallbacks of trial {self.trial.number} (monitor "
                f"{self.monitor!r} and {twin.monitor!r}); Optuna keeps the first value reported "
                "at a step, so the second's would be dropped: give the Trainer one (in a study "
                "with several objectives, one callback with monitor=[...], one per objective)"))
        refusal: tuple[str, str] | None = None
        if trainer.is_global_zero:
            if os.getpid() != self._pid:  # a copy, in a process the fit started (ddp_spawn)
                _check_shared_storage(self.trial, trainer)
            _say_if_a_stopped_trial_completed()
            refusal = self._study_refusal()  # before the first epoch trains, not after it
            if refusal is None:
                why = _note_resource(self.trial, self.resource)
                refusal = None if why is None else ("resource", why)
        if trainer.world_size > 1:  # every rank raises rank 0's refusal: none waits for it
            refusal = self._check_same_trial_on_every_rank(trainer, refusal)
        if refusal is not None:
            raise ConfigError(*refusal)

    def _study_refusal(self) -> tuple[str, str] | None:
        """``("monitor", why)`` when ``monitor`` names another number of metrics than the
        study has objectives, ``("pruner", why)`` when the study has several and a pruner that
        cannot rank them; None otherwise (and for a trial without a study)."""
        study = getattr(self.trial, "study", None)
        if study is None:
            return None
        if hasattr(self.trial, "_trial_id"):
            state = storage_of(study).get_trial(trial_id_of(self.trial)).state
            if state.is_finished():
                return ("trial", f"trial {self.trial.number} already ended {state.name} (study."
                        "tell, or a trial of an earlier optimize), and Optuna refuses its reports: "
                        "give the fit a running trial (study.ask(), or the objective's trial)")
        objectives = len(study.directions)
        if objectives != len(self._monitors):
            return ("monitor", f"names {len(self._monitors)} metric(s) {list(self._monitors)}, "
                    f"but study '{study.study_name}' has {objectives} objective(s): give one "
                    "per objective")
        why = _pruner_refusal(study) if objectives > 1 else None
        return None if why is None else ("pruner", why)

    def _check_same_trial_on_every_rank(self, trainer: L.Trainer,
                                        refusal: tuple[str, str] | None
                                        ) -> tuple[str, str] | None:
        """Raise unless every rank trains rank 0's trial; rank 0's ``refusal`` (field, why), on
        every rank."""
        mine = (self.trial.number, dict(self.trial.params))
        *leader, refusal = trainer.strategy.broadcast((*mine, refusal), src=0)
        if tuple(leader) != mine:
            raise RuntimeError(
                f"lightning_hpo: rank {trainer.global_rank} trains trial {mine[0]} {mine[1]} but "
                f"rank 0 trains trial {leader[0]} {leader[1]}. Under strategy='ddp' every rank "
                "re-runs the script and asks its own trial; create the study with "
                "lightning_hpo.create_study(...) / load_study(...) so all ranks follow rank 0."
            )
        return refusal

    @override
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Refuse a fit of the trial this callback already reported for, from a step it
        reported (the loops are restored by now: a fit resumed from its checkpoint goes on).
        Every rank knows the same history: each raises, none waits for another."""
        self._from_start = trainer.current_epoch == 0 and trainer.global_step == 0
        earlier = _last_reported(self.trial)
        if earlier is None:  # no fit of this process reported for this trial
            return
        first = (trainer.current_epoch if self.resource == "epoch" else trainer.global_step) + 1
        last, by = earlier
        if first <= last:
            through = "this callback" if by == id(self) else "another PruningCallback"
            raise ConfigError("trial", (
                f"trial {self.trial.number} already reported {self.resource}s up to {last} "
                f"through {through} in an earlier fit; this fit starts at {self.resource} "
                f"{first}, whose values Optuna would drop (it keeps a step's first report) "
                "while the pruner judged the earlier fit's: give each fit its own trial (and "
                "callback), or resume the earlier fit from its checkpoint "
                "(trainer.fit(..., ckpt_path=...))"))

    @override
    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING:
            return
        self._validations += 1
        if self.resource == "epoch":
            self._validated = True  # reported at the epoch's end, its last validation's value
        elif trainer.global_step > self._last_step and not self.pruned:
            self._last_step = trainer.global_step  # a step is reported once (Optuna's rule)
            self._decide(trainer, trainer.global_step)

    @override
    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.resource != "epoch" or not self._validated or self.pruned:
            return
        self._validated = False
        self._decide(trainer, trainer.current_epoch + 1)

    def _decide(self, trainer: L.Trainer, step: int) -> None:
        """Every rank: report the monitored values at ``step`` (rank 0), and stop training
        when the pruner says so (rank 0's answer, broadcast).

        A validation that logged none of the monitored metrics anew (a model that logs them on
        some epochs only) is not reported, said once a fit: Lightning keeps the last value in
        ``callback_metrics``, the same tensor object, which would be reported again as this
        step's. Nor is one before a monitored metric was first logged (the first epochs of a
        model that logs it every second epoch): :meth:`on_train_end` fails a fit that never
        logged it. A metric logged once (a parameter count) beside others logged anew counts."""
        metrics = trainer.callback_metrics
        current = tuple(metrics.get(name) for name in self._monitors)
        self._judged = step
        absent = [name for name, value in zip(self._monitors, current, strict=True)
                  if value is None]
        if absent or (self._seen is not None
                      and all(c is p for c, p in zip(current, self._seen, strict=True))):
            if trainer.is_global_zero and not self._skipped:  # every rank skips alike
                self._say_skipped(trainer, step, absent)
            self._skipped = True
            return
        self._seen = current
        dev_run = _fast_dev_run(trainer)
        if dev_run:  # a smoke test of the code: its values are no trial's
            if trainer.is_global_zero and self._judged_dev is None:
                _logger.warning(
                    "PruningCallback: trial %d: fast_dev_run=%r, so nothing is reported and the "
                    "pruner is not asked (values of a few batches would stay in the rung records "
                    "every later trial is compared with); Lightning's EarlyStopping and "
                    "ModelCheckpoint skip it too", self.trial.number, dev_run)
            self._judged_dev = step
            return
        self._reported += 1
        values = [self._read_metric(trainer, name, step) for name in self._monitors]
        _note_reported(self.trial, step, self)  # every rank: kept across fits and callbacks
        should_prune = False
        if trainer.is_global_zero:
            should_prune = self._report(values, step)
        should_prune = trainer.strategy.broadcast(should_prune, src=0)
        if should_prune:
            by_epoch = self.resource == "epoch"
            if by_epoch:
                self.pruned_at_epoch = step
            else:
                self.pruned_at_step = step
            if trainer.is_global_zero:
                self.trial.set_user_attr(
                    ATTR.PRUNED_AT_EPOCH if by_epoch else ATTR.PRUNED_AT_STEP, step)
                _remember_stopped(self.trial)
                shown = ", ".join(f"{n}={v:.4g}"
                                  for n, v in zip(self._monitors, values, strict=True))
                _logger.info("trial %d pruned at %s %d (%s)", self.trial.number, self.resource,
                             step, shown)
        trainer.should_stop = trainer.should_stop or should_prune

    def _say_skipped(self, trainer: L.Trainer, step: int, absent: list[str]) -> None:
        """Rank 0, once a fit: the validation at ``step`` was not reported."""
        if not absent:
            _logger.warning(
                "PruningCallback: trial %d: %s %d's validation logged nothing new for %s, so "
                "nothing was reported for it (said once a fit)",
                self.trial.number, self.resource, step, ", ".join(self._monitors))
            return
        _logger.warning(
            "PruningCallback: trial %d: by %s %d's validation %s was not logged yet (logged "
            "metrics: %s), so nothing was reported for it; a fit that never logs it fails at "
            "its end (said once a fit)", self.trial.number, self.resource, step,
            ", ".join(absent), _names(trainer.callback_metrics))

    @override
    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Every rank: fail a fit from scratch that validated but never logged a monitored
        metric (rank 0 then says nothing more); rank 0: say what kept the pruner from judging."""
        global _hinted
        never = self._never_logged(trainer)
        if never is not None:
            raise never
        if not trainer.is_global_zero:
            return
        if _fast_dev_run(trainer):  # said at its first validation, if it validated
            return
        if not self._reported and (trainer.current_epoch > 0 or trainer.global_step > 0):
            if self.resource == "step" and self._validations:
                _logger.warning(
                    "PruningCallback: trial %d validated only before its first optimizer step, "
                    "so nothing was reported and the pruner could not stop it",
                    self.trial.number)
                return
            _logger.warning(
                "PruningCallback: trial %d trained %d epoch(s) and reported nothing: fit never "
                "validated (no val_dataloader, limit_val_batches=0, or check_val_every_n_epoch "
                "above the epochs), so the pruner could not stop it",
                self.trial.number, trainer.current_epoch)
        elif (self.resource == "epoch" and self._reported <= 1 and self._validations > 1
              and not self.pruned and not _hinted):
            _hinted = True
            _logger.warning(
                "PruningCallback: trial %d validated %d times in %d epoch(s), and the pruner "
                "judged it at epoch ends only (%d time(s)): for a model trained by steps, "
                "PruningCallback(..., resource='step') reports each validation at its "
                "global_step (the pruner's rungs then count steps); said once",
                self.trial.number, self._validations, trainer.current_epoch, self._reported)

    def _report(self, values: list[float], step: int) -> bool:
        """Rank 0: report the epoch's values to the trial; whether the pruner stops it."""
        study = getattr(self.trial, "study", None)
        if study is None:  # a FixedTrial (a replay): nothing to compare with
            if len(values) > 1:
                return False
            self.trial.report(values[0], step)
            return bool(self.trial.should_prune())
        if len(study.directions) == 1:  # one monitor per objective: checked at fit start
            self.trial.report(values[0], step)
            return bool(self.trial.should_prune())
        # Several objectives: Optuna's report refuses them; the values go to a user attribute
        # and the study's pruner reads them from the trial (lightning_hpo.pruners._asha).
        self.trial.set_user_attr(ATTR.OBJECTIVE_VALUES, with_objective_values(
            self.trial, step, values))
        pruner = study.pruner
        if isinstance(pruner, optuna.pruners.NopPruner):
            return False
        why = _pruner_refusal(study)  # refused when fit started; here for one swapped since
        if why is not None:
            raise ConfigError("pruner", why)
        frozen = storage_of(study).get_trial(trial_id_of(self.trial))
        return bool(pruner.prune(study, frozen))

    def _never_logged(self, trainer: L.Trainer) -> ConfigError | None:
        """At the end of a fit from scratch that validated: the error for the first monitored
        metric it never logged; None otherwise (a resumed fit's earlier one may have)."""
        if self._judged is None or not self._from_start:
            return None
        metrics = trainer.callback_metrics
        for name in self._monitors:
            if name not in metrics:
                return not_logged("monitor", name, metrics, f"{self.resource} {self._judged}",
                                  trainer.logged_metrics)
        return None

    def _read_metric(self, trainer: L.Trainer, name: str, step: int) -> float:
        value = float(trainer.callback_metrics[name])
        if not math.isfinite(value) and trainer.is_global_zero:
            _logger.warning("PruningCallback: trial %d: %s is %s at %s %d, reported as it is "
                            "(ASHAPruner and HyperbandPruner stop such a trial)",
                            self.trial.number, name, value, self.resource, step)
        return value

    def raise_if_pruned(self) -> None:
        """Raise :class:`optuna.TrialPruned` if the pruner stopped this trial; call after ``fit``.

        Example::

            trainer.fit(model, datamodule=data)
            pruning.raise_if_pruned()   # Optuna records the trial as PRUNED
        """
        pruned: tuple[tuple[str, int | None], ...] = (
            ("epoch", self.pruned_at_epoch), ("step", self.pruned_at_step))
        if not self._fit_here:  # fit ran in processes started for it (strategy="ddp_spawn"),
            pruned = _stored_prune(self.trial)  # on copies of this object: rank 0 stored it
        for unit, at in pruned:
            if at is not None:
                raise optuna.TrialPruned(f"trial {self.trial.number} pruned at {unit} {at}")


#: Why a fit in processes started for it cannot take a study in this process's memory along.
_SPAWNED_FIT = ("runs fit in processes started for it, which work on copies of the trial and "
               "cannot write to a study held in this process's memory: give the study a "
               "storage they share (optuna.create_study(storage='sqlite:///study.db') or a "
               "journal file), or use strategy='ddp'")


def _check_shared_storage(trial: Any, trainer: L.Trainer) -> None:
    """Rank 0 of a fit in processes started for it (``ddp_spawn``, ``ddp_fork``): refuse a
    study in the parent's memory, whose copy here would take every report and lose it."""
    study = getattr(trial, "study", None)
    if study is None:  # a FixedTrial: nothing is written
        return
    if isinstance(unwrap_storage(storage_of(study)), optuna.storages.InMemoryStorage):
        strategy = type(trainer.strategy).__name__
        start = getattr(trainer.strategy, "_start_method", "unknown")
        raise ConfigError("strategy", f"{strategy} (start method {start}) {_SPAWNED_FIT}")


def _stored_prune(trial: Any) -> tuple[tuple[str, int | None], ...]:
    """Where the trial's rank 0 recorded that the pruner stopped it (its user attributes in
    the storage); None for each unit where it did not, or where there is no storage."""
    study = getattr(trial, "study", None)
    if study is None:
        return (("epoch", None), ("step", None))
    attrs = storage_of(study).get_trial(trial_id_of(trial)).user_attrs
    return tuple((unit, attrs.get(key) if isinstance(attrs.get(key), int) else None)
                 for unit, key in (("epoch", ATTR.PRUNED_AT_EPOCH),
                                   ("step", ATTR.PRUNED_AT_STEP)))


def _note_resource(trial: Any, resource: str) -> str | None:
    """Rank 0 at a fit's start: the study's :data:`~lightning_hpo.schema.RESOURCE_ATTR`, written
    when missing; why not to go on when the study already counts its steps otherwise.

    The report reads it to name the steps (epochs or optimizer steps). One read per study and
    process, one write per study. A study whose pruner compared epochs cannot go on by steps,
    nor the reverse: its rung records would mix the two.
    """
    study = getattr(trial, "study", None)
    if study is None or not hasattr(trial, "_trial_id"):  # a FixedTrial, a replay
        return None
    storage, study_id = storage_of(study), study_id_of(study)
    with _lock:
        known = _resources.setdefault(storage, {})
        stored = known.get(study_id)
        if stored is None:
            stored = storage.get_study_system_attrs(study_id).get(RESOURCE_ATTR)
            if not isinstance(stored, str) or stored not in RESOURCES:  # none yet, or unreadable
                storage.set_study_system_attr(study_id, RESOURCE_ATTR, resource)
                stored = resource
            known[study_id] = stored
    if stored == resource:
        return None
    return (f"is {resource!r}, but study '{study.study_name}' counts {stored}s (its first "
            f"PruningCallback had resource={stored!r}), and its pruner's rungs cannot mix epochs "
            f"and steps; keep resource={stored!r} or use a new study_name")


def _fast_dev_run(trainer: L.Trainer) -> int | bool:
    """``Trainer(fast_dev_run=...)``: False, True or a number of batches (set by the trainer's
    connector, which mypy does not see)."""
    value: int | bool = getattr(trainer, "fast_dev_run", False)
    return value


def _last_reported(trial: Any) -> tuple[int, int] | None:
    """The last step ``trial`` reported through a callback of this process, and that
    callback's id; None when none did (or the trial records nothing: a replay)."""
    if isinstance(trial, _REPLAYS):
        return None
    with _lock:
        try:
            return _reported.get(trial)
        except TypeError:  # a trial-like object that cannot be weakly referenced
            return None


def _note_reported(trial: Any, step: int, callback: PruningCallback) -> None:
    """Keep that ``callback`` reported ``step`` for ``trial`` (see :func:`_last_reported`)."""
    if isinstance(trial, _REPLAYS):
        return
    with _lock, contextlib.suppress(TypeError):  # not weakly referable: refits go unchecked
        _reported[trial] = (step, id(callback))


#: Trials whose ``report`` does nothing (a replay of a configuration): nothing to drop.
_REPLAYS = (optuna.trial.FixedTrial, optuna.trial.FrozenTrial)


def _shown(value: Any) -> str:
    """``value`` for a message: its repr, cut short, and its type."""
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def _remember_stopped(trial: Any) -> None:
    """Keep a trial the pruner stopped, to see later how the objective ended it."""
    study = getattr(trial, "study", None)
    if study is None or not hasattr(trial, "_trial_id"):  # a FixedTrial, a replay
        return
    with _lock:
        _stopped.append((storage_of(study), trial_id_of(trial), trial.number))


def _say_if_a_stopped_trial_completed() -> None:
    """Warn, once a process, when a trial the pruner stopped ended COMPLETE: its objective
    returned a value instead of calling :meth:`PruningCallback.raise_if_pruned`."""
    global _told
    with _lock:
        if _told:
            _stopped.clear()
            return
        running = []
        for storage, trial_id, number in _stopped:
            try:
                state = storage.get_trial(trial_id).state
            except Exception:  # noqa: BLE001 (a courtesy: never the reason a fit fails)
                _logger.debug("trial %d's state not read", number, exc_info=True)
                continue
            if state == TrialState.RUNNING:  # another thread's objective, still going
                running.append((storage, trial_id, number))
            elif state == TrialState.COMPLETE and not _told:
                _told = True
                _logger.warning(
                    "PruningCallback: trial %d was stopped by the pruner but ended COMPLETE, as "
                    "if it had trained every epoch: call pruning.raise_if_pruned() after "
                    "trainer.fit, and Optuna records such a trial PRUNED", number)
        _stopped[:] = running


def not_logged(field: str, name: str, metrics: Any, when: str,
               logged: Any = None) -> ConfigError:
    """The error for a metric ``name`` a fit was to log but did not, by ``when``: it lists
    ``metrics``' names (``trainer.callback_metrics``), for the reader to see the right one.
    ``logged`` (``trainer.logged_metrics``, what went to the loggers) tells a metric logged
    per step only in validation (``on_step=True, on_epoch=False``) from one never logged:
    Lightning hands such a value to its loggers and never to callbacks.

    Example::

        >>> error = not_logged("monitor", "acc", {"loss": 0.5, "lr": 0.1}, "epoch 6")
        >>> error.field
        'monitor'
        >>> print(error.message)
        'acc' is not logged by the LightningModule (by epoch 6); logged metrics: loss, lr
        >>> print(not_logged("metric", "val_loss", {"loss": 0.5}, "epoch 1",
        ...                  {"loss": 0.5, "val_loss": 0.7}).message)
        ... # doctest: +NORMALIZE_WHITESPACE
        'val_loss' is logged per validation step only (on_step=True, on_epoch=False), which
        Lightning hands to its loggers but not to callbacks (by epoch 1): log it with
        on_epoch=True (validation_step's default); metrics callbacks see: loss
    """
    if logged is not None and name in logged:
        seen = f"metrics callbacks see: {_names(metrics)}"
        epoch_name = name.removesuffix("_step")
        if epoch_name != name and epoch_name in metrics:  # on_step=True, on_epoch=True
            return ConfigError(field, f"'{name}' is the per-step name of '{epoch_name}', which "
                               "Lightning hands to its loggers but not to callbacks (by "
                               f"{when}): name its epoch value, '{epoch_name}'; {seen}")
        return ConfigError(field, f"'{name}' is logged per validation step only (on_step=True, "
                           "on_epoch=False), which Lightning hands to its loggers but not to "
                           f"callbacks (by {when}): log it with on_epoch=True (validation_step's "
                           f"default); {seen}")
    return ConfigError(field, f"'{name}' is not logged by the LightningModule (by {when}); "
                       f"logged metrics: {_names(metrics)}")


def _names(metrics: Any) -> str:
    """The logged metrics' names, sorted, for a message."""
    return ", ".join(sorted(metrics)) or "none"


def _pruner_refusal(study: Any) -> str | None:
    """Why a study with several objectives cannot take its pruner (one that reads only
    ``trial.report``'s values, which such a study refuses); None when it can."""
    pruner = study.pruner
    if (isinstance(pruner, optuna.pruners.NopPruner)
            or getattr(pruner, "supports_several_objectives", False)):
        return None
    default = (" (Optuna's default when create_study is given no pruner)"
               if type(pruner) is optuna.pruners.MedianPruner else "")
    return (f"is {type(pruner).__name__}, which cannot rank several objectives{default}; use "
            "lightning_hpo.ASHAPruner or HyperbandPruner (or optuna.pruners.NopPruner)")


def _monitor_names(monitor: str | Sequence[str]) -> tuple[str, ...]:
    """``monitor`` as a tuple of metric names.

    Raises:
        ConfigError: not a name or a non-empty list of distinct names.
    """
    names = (monitor,) if isinstance(monitor, str) else monitor
    if (not isinstance(names, Sequence) or not names
            or not all(isinstance(n, str) and n for n in names)):
        raise ConfigError("monitor", f"is {monitor!r}, but must be a metric name or a list of them")
    if len(set(names)) != len(names):
        raise ConfigError("monitor", f"is {list(names)}, but must not name a metric twice")
    return tuple(names)
