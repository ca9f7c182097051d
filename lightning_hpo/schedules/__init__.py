"""The launcher's pausing schedules: which job a free slot takes next. Pure logic, no I/O.

A *schedule* looks at every trial of the study (:class:`TrialView`: its state, the epochs it has
done, its intermediate values, its round or bracket) and answers one :class:`Decision`: a
:class:`Job` for the free slot (start a new configuration, resume a paused trial to some epoch,
wait, or nothing more to do) and the paused trials that can never be promoted, which the caller
ends PRUNED (deleting their checkpoints). The caller keeps every piece of state in the Optuna
storage, so any launcher, after any crash, computes the same decision from the same trials.

* :class:`StopSchedule`: today's behaviour; trials run to ``max_epochs`` and a pruner stops them.
* :class:`SyncSuccessiveHalving` and :class:`SyncHyperband`: synchronous successive halving in
  rounds, the textbook scheduler (Jamieson and Talwalkar, AISTATS 2016; brackets as in Li et al.,
  "Hyperband", JMLR 2018).
* :class:`PromotionASHA` and :class:`PromotionHyperband`: promotion-type ASHA (Li et al., "A
  System for Massively Parallel Hyperparameter Tuning", MLSys 2020, Algorithm 2).

Every schedule resumes *interrupted* trials first (paused with a ``target``: cut short by the
wall-clock budget, Ctrl-C or a crash), lowest trial number first, to that target. Rankings at a
rung put NaN and infinite values last and break ties by the lower trial number; with several
objectives (``minimize`` a tuple, values tuples) they are Pareto fronts, an epsilon-net within
each (:func:`lightning_hpo.pareto.pareto_order`), multi-objective ASHA. Epochs are counted
from 1, as the intermediate values' steps; rungs and rounds come from
:mod:`lightning_hpo.pruners.rungs`.

One module per family: ``_base`` (the types every schedule shares), ``_stop``, ``_synchronous``
and ``_promotion``.

Example::

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
