"""What every rung store is: :class:`RungRecord` and the two operations of :class:`RungStore`.

The implementations are in :mod:`lightning_hpo.pruners._store` (study attributes, the gRPC proxy)
and :mod:`lightning_hpo.pruners._table` (an SQL table), which picks one for a study's storage.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["RungRecord", "RungStore"]


class RungRecord(NamedTuple):
    """One trial's value at one rung of one bracket (``rung`` in epochs)."""

    bracket: int
    rung: int
    trial_number: int
    value: float


class RungStore(abc.ABC):
    """The two operations a pruning decision needs, bound to one study of one storage."""

    @abc.abstractmethod
    def add_and_rank(
        self,
        bracket: int,
        rungs: Sequence[int],
        trial_number: int,
        value: float,
        *,
        maximize: bool,
    ) -> tuple[int, int]:
        """Record ``value`` at every rung of ``rungs`` (ascending), then rank it at the last one.

        Returns:
            ``(n, n_better)``: the number of records at ``rungs[-1]`` (this one included) and how
            many of them are strictly better than ``value`` (greater when ``maximize``, else
            smaller); :func:`lightning_hpo.pruners._asha.asha_continues` decides on them.
        """

    @abc.abstractmethod
    def records(self) -> list[RungRecord]:
        """Every record of the study, sorted by bracket, rung and trial number."""
