"""The launcher's pausing schedules: which job a free slot takes next. Pure logic, no I/O.

A *schedule* looks at every trial of the study (:class:`TrialView`) and answers one
:class:`Decision`: a :class:`Job` for the free slot (start a new configuration, resume a paused
trial to some epoch, wait, or nothing more to do) and the paused trials that can never be
promoted, which the caller ends PRUNED. The caller keeps all state in the Optuna storage, so any
launcher, after any crash, computes the same decision from the same trials.

* :class:`StopSchedule`: trials run to ``max_epochs`` and a pruner stops them;
* :class:`SyncSuccessiveHalving` and :class:`SyncHyperband`: synchronous successive halving in
  rounds (Jamieson and Talwalkar, 2016; brackets as in Li et al., "Hyperband", 2018);
* :class:`PromotionASHA` and :class:`PromotionHyperband`: promotion-type ASHA (Li et al., MLSys
  2020, Algorithm 2).

Every schedule first resumes *interrupted* trials (paused with a ``target``), lowest number
first. Rankings at a rung put NaN and infinite values last and break ties by the lower trial
number; with several objectives they follow :func:`lightning_hpo.pareto.pareto_order`. Epochs
count from 1; rungs and rounds come from :mod:`lightning_hpo.pruners.rungs`. Example::

    >>> schedule = SyncSuccessiveHalving(2, 10, 2)
    >>> schedule.decide([], tickets=8, next_number=0).job
    Job(kind='start', trial=None, to_epoch=2, group=0, from_scratch=False)
"""

from lightning_hpo.schedules._base import (
    Decision,
    Job,
    Minimize,
    Schedule,
    State,
    TrialView,
    Value,
)
from lightning_hpo.schedules._promotion import PromotionASHA, PromotionHyperband, promotable
from lightning_hpo.schedules._stop import StopSchedule
from lightning_hpo.schedules._synchronous import SyncHyperband, SyncSuccessiveHalving

__all__ = [
    "Decision",
    "Job",
    "Minimize",
    "PromotionASHA",
    "PromotionHyperband",
    "Schedule",
    "State",
    "StopSchedule",
    "SyncHyperband",
    "SyncSuccessiveHalving",
    "TrialView",
    "Value",
    "promotable",
]
