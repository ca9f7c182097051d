"""Rung arithmetic for successive halving, ASHA and Hyperband: pure functions, no I/O, no Optuna.

A *rung* is a resource level (epochs completed, counted from 1) at which a trial is compared with
the other trials that reached it. Rungs are ``min_resource * reduction_factor**k``; with a
``max_resource`` the ladder stops there and ``max_resource`` is the last rung even when it is not
a power level. Without one the ladder has no top (:func:`rung_levels` takes ``up_to``). Which
trials continue at a rung is :func:`lightning_hpo.pruners._asha.asha_continues`'s rule.
Hyperband's brackets (:func:`hyperband_brackets`, :func:`trial_allocation_budgets`,
:func:`bracket_of`) reproduce Optuna's ``HyperbandPruner`` bookkeeping with exact integers, and
the synchronous schedules' rounds are here too (:func:`successive_halving_plan`,
:func:`hyperband_rounds`, :func:`round_epochs`): the one place rungs are counted.

**One argument order**: ``min_resource, max_resource, reduction_factor``, Optuna's
``HyperbandPruner``'s. Where a signature mirrors ``SuccessiveHalvingPruner(min_resource,
reduction_factor)`` (:class:`~lightning_hpo.pruners._asha.ASHAPruner`, :func:`rung_levels`,
:func:`next_rung_level`, :func:`successive_halving_plan`), ``max_resource`` and
``reduction_factor`` are keyword-only, so a call in the other order fails instead of meaning
something else. Example::

    >>> rung_levels(1, max_resource=27, reduction_factor=3)
    [1, 3, 9, 27]
    >>> rung_levels(2, max_resource=10, reduction_factor=2)
    [2, 4, 8, 10]
    >>> successive_halving_plan(2, max_resource=10, reduction_factor=2)
    [(2, 8), (4, 4), (8, 2), (10, 1)]
    >>> crossed_rungs([2, 4, 8, 10], previous_step=3, step=8)
    [4, 8]
"""

from __future__ import annotations

import binascii
from bisect import bisect_right
from collections.abc import Sequence

from lightning_hpo.errors import argument_int

__all__ = [
    "bracket_min_resource",
    "bracket_of",
    "crossed_rungs",
    "hyperband_brackets",
    "hyperband_rounds",
    "next_rung_level",
    "round_epochs",
    "rung_levels",
    "successive_halving_plan",
    "trial_allocation_budgets",
]


def rung_levels(
    min_resource: int,
    *,
    max_resource: int | None = None,
    reduction_factor: int,
    up_to: int | None = None,
) -> list[int]:
    """The rung levels of one successive-halving ladder, in epochs, ascending.

    Args:
        min_resource: the first rung, in epochs (``>= 1``).
        max_resource: the last rung, in epochs (``>= min_resource``); it ends the list even when
            it is not ``min_resource * reduction_factor**k``. ``None`` means no top: the ladder is
            unbounded, and ``up_to`` must say how far to list it.
        reduction_factor: the ratio between consecutive rungs (``>= 2``).
        up_to: list only the rungs ``<= up_to`` (epochs, ``>= 0``). Required when
            ``max_resource`` is ``None``; optional otherwise.

    Returns:
        The rung levels; with ``max_resource`` (and no ``up_to`` below it) the last one is
        ``max_resource``.

    Raises:
        ValueError: an argument is not an integer in its range (the message names it).

    Example::

        >>> from lightning_hpo import rung_levels
        >>> rung_levels(1, max_resource=27, reduction_factor=3)
        [1, 3, 9, 27]
        >>> rung_levels(2, max_resource=10, reduction_factor=2)
        [2, 4, 8, 10]
        >>> rung_levels(1, reduction_factor=3, up_to=30)
        [1, 3, 9, 27]
    """
    _check_ladder(min_resource, max_resource, reduction_factor)
    if up_to is None:
        if max_resource is None:
            raise ValueError(
                "The value of `up_to` is None, but must be an integer `up_to >= 0` when "
                "`max_resource` is None (the rungs are unbounded)."
            )
        limit = max_resource
    else:
        argument_int("up_to", up_to, 0)
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
    step: int, min_resource: int, *, max_resource: int | None = None, reduction_factor: int
) -> int | None:
    """The first rung above ``step`` (epochs), or ``None`` when ``step`` is at or past the top.

    Works for unbounded ladders (``max_resource=None``), where there is always a next rung.

    Example::

        >>> next_rung_level(0, 1, reduction_factor=3)
        1
        >>> next_rung_level(9, 1, reduction_factor=3)
        27
        >>> [next_rung_level(step, 2, max_resource=10, reduction_factor=2) for step in (8, 10)]
        [10, None]
    """
    _check_ladder(min_resource, max_resource, reduction_factor)
    argument_int("step", step, 0)
    if max_resource is not None and step >= max_resource:
        return None
    level = min_resource
    while level <= step:
        level *= reduction_factor
    return level if max_resource is None else min(level, max_resource)


def successive_halving_plan(
    min_resource: int,
    *,
    max_resource: int,
    reduction_factor: int,
    prefact: int = 1,
    configs: int | None = None,
) -> list[tuple[int, int]]:
    """One synchronous round of successive halving: ``(rung level, configurations)`` pairs.

    With ``K + 1`` rungs (:func:`rung_levels`, ``max_resource`` included), the round starts
    ``prefact * reduction_factor**K`` configurations at ``min_resource``, and each rung keeps
    ``floor(held / reduction_factor)`` of the ``held`` ones, so ``prefact`` configurations reach
    ``max_resource``.

    Args:
        min_resource: the first rung, in epochs (``>= 1``).
        max_resource: the last rung, in epochs (``>= min_resource``).
        reduction_factor: keep one in ``reduction_factor`` at each rung (``>= 2``).
        prefact: configurations per round, as a multiple of ``reduction_factor**K`` (``>= 1``).
        configs: start this many instead (a round cut short by the trial budget; ``>= 0``).

    Raises:
        ValueError: an argument is not an integer in its range (the message names it).

    Example::

        >>> from lightning_hpo import successive_halving_plan
        >>> successive_halving_plan(2, max_resource=10, reduction_factor=2)
        [(2, 8), (4, 4), (8, 2), (10, 1)]
        >>> successive_halving_plan(1, max_resource=27, reduction_factor=3)
        [(1, 27), (3, 9), (9, 3), (27, 1)]
        >>> successive_halving_plan(1, max_resource=1000, reduction_factor=10, prefact=2)
        [(1, 2000), (10, 200), (100, 20), (1000, 2)]
        >>> successive_halving_plan(2, max_resource=10, reduction_factor=2, configs=5)
        [(2, 5), (4, 2), (8, 1), (10, 0)]
    """
    if max_resource is None:
        raise ValueError(
            "The value of `max_resource` is None, but must be an integer "
            "`max_resource >= min_resource`."
        )
    levels = rung_levels(min_resource, max_resource=max_resource,
                         reduction_factor=reduction_factor)
    held = argument_int("prefact", prefact, 1) * reduction_factor ** (len(levels) - 1)
    if configs is not None:
        held = argument_int("configs", configs, 0)
    plan = []
    for level in levels:
        plan.append((level, held))
        held //= reduction_factor
    return plan


def round_epochs(plan: Sequence[tuple[int, int]], resume: bool) -> int:
    """Epochs one synchronous round trains, for a :func:`successive_halving_plan`.

    With ``resume``, a promoted configuration continues from its checkpoint and trains only the
    epochs between its rungs; without, it retrains from epoch 0 up to the next rung, as the
    textbook code does.

    Example::

        >>> plan = successive_halving_plan(2, max_resource=10, reduction_factor=2)
        >>> round_epochs(plan, resume=True), round_epochs(plan, resume=False)
        (34, 58)
    """
    total, previous = 0, 0
    for level, configs in plan:
        total += configs * (level - previous if resume else level)
        previous = level
    return total


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
    _check_ladder(min_resource, max_resource, reduction_factor)
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
    argument_int("min_resource", min_resource, 1)
    argument_int("reduction_factor", reduction_factor, 2)
    argument_int("bracket", bracket, 0)
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
    return [_bracket_size(n_brackets, bracket, reduction_factor) for bracket in range(n_brackets)]


def hyperband_rounds(
    min_resource: int, max_resource: int, reduction_factor: int, prefact: int = 1
) -> list[tuple[list[int], int]]:
    """Synchronous Hyperband's brackets, ``(rungs in epochs, configurations)``, in round order.

    With the full ladder's ``s_max + 1`` rungs (:func:`rung_levels`), round ``j`` runs bracket
    ``s = s_max - (j mod (s_max + 1))``: the ladder without its first ``s_max - s`` rungs,
    started with ``prefact * ceil((s_max + 1) / (s + 1) * reduction_factor**s)`` configurations
    (Li et al., JMLR 2018, Algorithm 1, in exact integers; the share
    :func:`trial_allocation_budgets` gives bracket ``s_max - s``). The list holds one full
    cycle, the most aggressive bracket first.

    Raises:
        ValueError: an argument is out of range, naming it.

    Example::

        >>> for ladder, configs in hyperband_rounds(1, 27, 3):
        ...     print(ladder, configs)
        [1, 3, 9, 27] 27
        [3, 9, 27] 12
        [9, 27] 6
        [27] 4
    """
    levels = rung_levels(min_resource, max_resource=max_resource,
                         reduction_factor=reduction_factor)
    argument_int("prefact", prefact, 1)
    # One bracket per rung, the appended max_resource included (the textbook's K + 1 rungs;
    # Optuna's hyperband_brackets does not count an appended max_resource).
    return [(levels[bracket:], prefact * _bracket_size(len(levels), bracket, reduction_factor))
            for bracket in range(len(levels))]


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


def _bracket_size(n_brackets: int, bracket: int, reduction_factor: int) -> int:
    """Hyperband's ``n_i`` for bracket ``bracket`` of ``n_brackets``: ``ceil(B * eta**s / (s + 1))``
    with ``s = B - 1 - bracket``, in exact integers."""
    s = n_brackets - 1 - bracket
    return -(-(n_brackets * reduction_factor**s) // (s + 1))


def _check_ladder(min_resource: int, max_resource: int | None, reduction_factor: int) -> None:
    argument_int("min_resource", min_resource, 1)
    argument_int("reduction_factor", reduction_factor, 2)
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
