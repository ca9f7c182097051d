"""The stopping schedule: trials train to ``max_epochs`` unless a pruner stops them."""

from __future__ import annotations

from collections.abc import Sequence

from lightning_hpo.errors import argument_int
from lightning_hpo.schedules._base import (
    Decision,
    Job,
    Schedule,
    TrialView,
    check_call,
    first_interrupted,
    has_tickets,
)

__all__ = ["StopSchedule"]


class StopSchedule(Schedule):
    """Today's behaviour: every trial trains to ``max_epochs`` unless a pruner stops it.

    Interrupted trials are resumed first (lowest number first) to their target; a trial paused
    at a rung (only left by a pausing schedule the study ran before) continues to
    ``max_epochs``; otherwise a new configuration starts while tickets last; then ``"done"``.

    Args:
        max_epochs: the epochs a trial trains (``>= 1``).

    Example::

        >>> schedule = StopSchedule(9)
        >>> schedule.decide([], tickets=None, next_number=0).job
        Job(kind='start', trial=None, to_epoch=9, group=None, from_scratch=False)
        >>> schedule.decide([TrialView(0, "paused", epoch=3, target=9)], tickets=0,
        ...                 next_number=1).job
        Job(kind='resume', trial=0, to_epoch=9, group=None, from_scratch=False)
        >>> schedule.decide([TrialView(0, "running", epoch=3)], tickets=0, next_number=1).job
        Job(kind='done', trial=None, to_epoch=None, group=None, from_scratch=False)
    """

    name = "stop"

    def __init__(self, max_epochs: int) -> None:
        argument_int("max_epochs", max_epochs, 1)
        self.max_epochs = max_epochs

    def ladders(self) -> list[list[int]]:
        """One ladder, ``[max_epochs]``: the pruner's rungs are its own."""
        return [[self.max_epochs]]

    def decide(
        self, trials: Sequence[TrialView], *, tickets: int | None, next_number: int
    ) -> Decision:
        """Resume interrupted, then rung-paused trials; else start; else ``"done"``."""
        check_call(trials, tickets, next_number)
        resume = first_interrupted(trials)
        if resume is not None:
            return Decision(resume)
        for trial in sorted(trials, key=lambda t: t.number):
            if trial.at_rung and trial.epoch < self.max_epochs:
                return Decision(Job("resume", trial=trial.number, to_epoch=self.max_epochs))
        if has_tickets(tickets):
            return Decision(Job("start", to_epoch=self.max_epochs))
        return Decision(Job("done"))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_epochs={self.max_epochs})"
