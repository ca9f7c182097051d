"""Rung arithmetic for successive halving, ASHA and Hyperband: pure functions, no I/O, no Optuna.

A *rung* is a resource level (epochs completed, counted from 1) at which a trial is compared with
the other trials that reached it. Rungs are ``min_resource * reduction_factor**k`` for
``k = 0, 1, ...``; with a ``max_resource`` the ladder stops there and ``max_resource`` is the last
rung even when it is not a power level (``min_resource=2, reduction_factor=2, max_resource=10``
gives rungs 2, 4, 8, 10). Without ``max_resource`` the ladder has no top: :func:`rung_levels`
then lists the rungs up to a step you name (``up_to``) and :func:`next_rung_level` walks it.

Which trials continue at a rung is the pruner's rule, not arithmetic of the ladder: see
:func:`lightning_hpo.pruners.asha_continues`.

Hyperband (Li et al., "Hyperband: A Novel Bandit-Based Approach to Hyperparameter
Optimization", JMLR 2018) runs several such ladders, *brackets*, with a growing minimum
resource; :func:`hyperband_brackets`, :func:`trial_allocation_budgets` and :func:`bracket_of`
reproduce Optuna's ``HyperbandPruner`` bookkeeping with exact integer arithmetic.

Example::

    >>> rung_levels(1, 3, 27)
    [1, 3, 9, 27]
    >>> rung_levels(2, 2, 10)
    [2, 4, 8, 10]
    >>> successive_halving_plan(2, 2, 10)
    [(2, 8), (4, 4), (8, 2), (10, 1)]
    >>> crossed_rungs([2, 4, 8, 10], previous_step=3, step=8)
    [4, 8]
"""

from __future__ import annotations

import binascii
from bisect import bisect_right
from collections.abc import Sequence

__all__ = [
    "bracket_min_resource",
    "bracket_of",
    "crossed_rungs",
    "hyperband_brackets",
    "next_rung_level",
    "rung_levels",
    "successive_halving_plan",
    "trial_allocation_budgets",
]


def rung_levels(
    min_resource: int,
    reduction_factor: int,
    max_resource: int | None = None,
    *,
    up_to: int | None = None,
) -> list[int]:
    """The rung levels of one successive-halving ladder, in epochs, ascending.

    Args:
        min_resource: the first rung, in epochs (``>= 1``).
        reduction_factor: the ratio between consecutive rungs (``>= 2``).
        max_resource: the last rung, in epochs (``>= min_resource``); it ends the list even when
            it is not ``min_resource * reduction_factor**k``. ``None`` means no top: the ladder is
            unbounded, and ``up_to`` must say how far to list it.
        up_to: list only the rungs ``<= up_to`` (epochs, ``>= 0``). Required when
            ``max_resource`` is ``None``; optional otherwise.

    Returns:
        The rung levels; with ``max_resource`` (and no ``up_to`` below it) the last one is
        ``max_resource``.

    Raises:
        ValueError: an argument is not an integer in its range (the message names it).

    Example::

        >>> rung_levels(1, 3, 27)
        [1, 3, 9, 27]
        >>> rung_levels(2, 2, 10)
        [2, 4, 8, 10]
        >>> rung_levels(1, 3, up_to=30)
        [1, 3, 9, 27]
    """
    _check_ladder(min_resource, reduction_factor, max_resource)
    if up_to is None:
        if max_resource is None:
            raise ValueError(
                "The value of `up_to` is None, but must be an integer `up_to >= 0` when "
                "`max_resource` is None (the rungs are unbounded)."
            )
        limit = max_resource
    else:
        _check_int("up_to", up_to, 0)
        limit = up_to if max_resource is None else min(up_to, max_resource)
    levels: list[int] = []
    level = min_resource
    while level <= limit:
        levels.append(level)
        level *= reduction_factor
    if max_resource is not None and limit == max_resource and levels[-1] != max_resource:
        levels.append(max_resource)
    return levels


def next_rung_level(
    step: int, min_resource: int, reduction_factor: int, max_resource: int | None = None
) -> int | None:
    """The first rung above ``step`` (epochs), or ``None`` when ``step`` is at or past the top.

    Works for unbounded ladders (``max_resource=None``), where there is always a next rung.

    Example::

        >>> next_rung_level(0, 1, 3)
        1
        >>> next_rung_level(9, 1, 3)
        27
        >>> next_rung_level(8, 2, 2, 10), next_rung_level(10, 2, 2, 10)
        (10, None)
    """
    _check_ladder(min_resource, reduction_factor, max_resource)
    _check_int("step", step, 0)
    if max_resource is not None and step >= max_resource:
        return None
    level = min_resource
    while level <= step:
        level *= reduction_factor
    return level if max_resource is None else min(level, max_resource)


def successive_halving_plan(
    min_resource: int, reduction_factor: int, max_resource: int
) -> list[tuple[int, int]]:
    """One synchronous round of successive halving: ``(rung level, configurations)`` pairs.

    With ``L`` rungs (:func:`rung_levels`, ``max_resource`` included), the round starts
    ``reduction_factor**(L - 1)`` configurations at ``min_resource`` and keeps the best
    ``1 / reduction_factor`` at each rung, so one configuration reaches ``max_resource``.

    Args:
        min_resource: the first rung, in epochs (``>= 1``).
        reduction_factor: keep one in ``reduction_factor`` at each rung (``>= 2``).
        max_resource: the last rung, in epochs (``>= min_resource``).

    Raises:
        ValueError: an argument is not an integer in its range (the message names it).

    Example::

        >>> successive_halving_plan(2, 2, 10)
        [(2, 8), (4, 4), (8, 2), (10, 1)]
        >>> successive_halving_plan(1, 3, 27)
        [(1, 27), (3, 9), (9, 3), (27, 1)]
    """
    if max_resource is None:
        raise ValueError(
            "The value of `max_resource` is None, but must be an integer "
            "`max_resource >= min_resource`."
        )
    levels = rung_levels(min_resource, reduction_factor, max_resource)
    top = len(levels) - 1
    return [(level, reduction_factor ** (top - k)) for k, level in enumerate(levels)]


def crossed_rungs(levels: Sequence[int], previous_step: int, step: int) -> list[int]:
    """The rungs a report reaches for the first time: the ``levels`` in ``(previous_step, step]``.

    Args:
        levels: rung levels, ascending (from :func:`rung_levels`).
        previous_step: the trial's largest reported step before this one, or 0 (epochs).
        step: the step of this report (epochs).

    Example::

        >>> crossed_rungs([1, 3, 9, 27], 0, 1)
        [1]
        >>> crossed_rungs([1, 3, 9, 27], 1, 2)
        []
        >>> crossed_rungs([1, 3, 9, 27], 2, 10)
        [3, 9]
    """
    return list(levels[bisect_right(levels, previous_step) : bisect_right(levels, step)])


def hyperband_brackets(min_resource: int, max_resource: int, reduction_factor: int) -> int:
    """The number of Hyperband brackets: ``floor(log_eta(max_resource / min_resource)) + 1``.

    Computed exactly with integers (Optuna's floating ``math.log`` can come out one short, e.g.
    ``math.log(243, 3) == 4.999999999999999``).

    Example::

        >>> [hyperband_brackets(1, max_resource, 3) for max_resource in (26, 27, 243)]
        [3, 4, 6]
    """
    _check_ladder(min_resource, reduction_factor, max_resource)
    count, level = 1, min_resource * reduction_factor
    while level <= max_resource:
        count += 1
        level *= reduction_factor
    return count


def bracket_min_resource(min_resource: int, reduction_factor: int, bracket: int) -> int:
    """Bracket ``bracket``'s first rung: ``min_resource * reduction_factor**bracket`` (epochs).

    Example::

        >>> [bracket_min_resource(1, 3, s) for s in range(4)]
        [1, 3, 9, 27]
    """
    _check_int("min_resource", min_resource, 1)
    _check_int("reduction_factor", reduction_factor, 2)
    _check_int("bracket", bracket, 0)
    return min_resource * reduction_factor**bracket


def trial_allocation_budgets(
    min_resource: int, max_resource: int, reduction_factor: int
) -> list[int]:
    """Each bracket's share of trials, as Optuna's ``HyperbandPruner`` allocates them.

    Bracket ``b`` of ``B`` gets ``ceil(B * eta**s / (s + 1))`` with ``s = B - 1 - b``: the most
    aggressive bracket (``b = 0``) gets the most trials, Hyperband's ``n_i`` (Li et al., JMLR
    2018, Algorithm 1) as a ratio because Optuna does not know the number of trials.

    Example::

        >>> trial_allocation_budgets(1, 27, 3)
        [27, 12, 6, 4]
    """
    n_brackets = hyperband_brackets(min_resource, max_resource, reduction_factor)
    budgets = []
    for bracket in range(n_brackets):
        s = n_brackets - 1 - bracket
        budgets.append(-(-(n_brackets * reduction_factor**s) // (s + 1)))  # exact ceil
    return budgets


def bracket_of(study_name: str, trial_number: int, budgets: Sequence[int]) -> int:
    """The Hyperband bracket of a trial, from its study name and number alone.

    ``binascii.crc32(f"{study_name}_{trial_number}") % sum(budgets)`` picks a slot, and the
    bracket is the one whose budget holds it, exactly as Optuna's ``HyperbandPruner`` does: every
    process computes the same bracket without talking to the others.

    Args:
        study_name: the Optuna study's name.
        trial_number: the trial's number in the study (0-based, Optuna's ``trial.number``).
        budgets: per-bracket budgets from :func:`trial_allocation_budgets`.

    Example::

        >>> bracket_of("lenet-hyperband", 0, [27, 12, 6, 4]) in range(4)
        True
    """
    total = sum(budgets)
    if not budgets or total < 1 or any(budget < 0 for budget in budgets):
        raise ValueError(
            f"The value of `budgets` is {list(budgets)}, but must be non-negative integers "
            "with a positive sum."
        )
    slot = binascii.crc32(f"{study_name}_{trial_number}".encode()) % total
    for bracket, budget in enumerate(budgets):
        slot -= budget
        if slot < 0:
            return bracket
    raise AssertionError("unreachable: the slot is below the sum of the budgets")


def _check_int(name: str, value: object, minimum: int) -> None:
    # bool is an int in Python; a resource of True epochs is a bug, not a 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(
            f"The value of `{name}` is {value!r}, but must be an integer `{name} >= {minimum}`."
        )
    if value < minimum:
        raise ValueError(f"The value of `{name}` is {value}, but must be `{name} >= {minimum}`.")


def _check_ladder(min_resource: int, reduction_factor: int, max_resource: int | None) -> None:
    _check_int("min_resource", min_resource, 1)
    _check_int("reduction_factor", reduction_factor, 2)
    if max_resource is None:
        return
    if isinstance(max_resource, bool) or not isinstance(max_resource, int):
        raise ValueError(
            f"The value of `max_resource` is {max_resource!r}, but must be an integer "
            "`max_resource >= min_resource`."
        )
    if max_resource < min_resource:
        raise ValueError(
            f"The value of `max_resource` is {max_resource}, but must be "
            f"`max_resource >= min_resource` ({min_resource})."
        )

