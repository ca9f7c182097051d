"""Rung arithmetic (``lightning_hpo.pruners.rungs``): pure functions, checked exhaustively.

Optuna is imported only where its own ``HyperbandPruner`` bookkeeping is the reference.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Callable
from fractions import Fraction

import pytest

from lightning_hpo.pruners import rungs
from lightning_hpo.pruners.rungs import (
    bracket_min_resource,
    bracket_of,
    crossed_rungs,
    hyperband_brackets,
    hyperband_rounds,
    next_rung_level,
    round_epochs,
    rung_levels,
    successive_halving_plan,
    trial_allocation_budgets,
)


def _levels(args: tuple, **kwargs: object) -> list[int]:
    """``rung_levels`` of a ``(min_resource, reduction_factor, max_resource)`` tuple."""
    min_resource, eta, max_resource = args
    return rung_levels(min_resource, max_resource=max_resource, reduction_factor=eta, **kwargs)


def _plan(args: tuple, **kwargs: object) -> list[tuple[int, int]]:
    """``successive_halving_plan`` of a ``(min_resource, reduction_factor, max_resource)`` tuple."""
    min_resource, eta, max_resource = args
    return successive_halving_plan(min_resource, max_resource=max_resource, reduction_factor=eta,
                                   **kwargs)


# (min_resource, reduction_factor, max_resource) -> rung levels
_LADDERS = {
    (1, 3, 27): [1, 3, 9, 27],
    (2, 2, 10): [2, 4, 8, 10],
    (1, 2, 1): [1],
    (5, 3, 5): [5],
    (1, 3, 1): [1],
    (1, 3, 2): [1, 2],
    (1, 3, 3): [1, 3],
    (1, 3, 26): [1, 3, 9, 26],
    (1, 3, 28): [1, 3, 9, 27, 28],
    (1, 2, 16): [1, 2, 4, 8, 16],
    (1, 2, 17): [1, 2, 4, 8, 16, 17],
    (3, 3, 100): [3, 9, 27, 81, 100],
    (4, 4, 64): [4, 16, 64],
    (1, 10, 1000): [1, 10, 100, 1000],
    (1, 10, 999): [1, 10, 100, 999],
    (2, 5, 9): [2, 9],
    (7, 2, 13): [7, 13],
    (1, 100, 50): [1, 50],
    (1, 3, 243): [1, 3, 9, 27, 81, 243],
}


@pytest.mark.parametrize(
    ("args", "expected"), list(_LADDERS.items()), ids=["-".join(map(str, a)) for a in _LADDERS]
)
def test_rung_levels(args: tuple[int, int, int], expected: list[int]) -> None:
    assert _levels(args) == expected


@pytest.mark.parametrize("args", list(_LADDERS), ids=["-".join(map(str, a)) for a in _LADDERS])
def test_rung_levels_properties(args: tuple[int, int, int]) -> None:
    min_resource, eta, max_resource = args
    levels = _levels(args)
    assert levels[0] == min_resource and levels[-1] == max_resource
    assert levels == sorted(set(levels))
    assert all(level == min_resource * eta**k for k, level in enumerate(levels[:-1]))
    # every power level up to max_resource is there, and nothing above it
    powers = [min_resource * eta**k for k in range(len(levels) + 1)]
    assert [p for p in powers if p <= max_resource] == [p for p in levels if p in powers]


@pytest.mark.parametrize(
    ("args", "up_to", "expected"),
    [
        ((1, 3, None), 0, []),
        ((1, 3, None), 1, [1]),
        ((1, 3, None), 8, [1, 3]),
        ((1, 3, None), 9, [1, 3, 9]),
        ((1, 3, None), 1000, [1, 3, 9, 27, 81, 243, 729]),
        ((2, 2, None), 10, [2, 4, 8]),
        ((1, 3, 27), 10, [1, 3, 9]),
        ((1, 3, 27), 27, [1, 3, 9, 27]),
        ((1, 3, 27), 100, [1, 3, 9, 27]),
        ((2, 2, 10), 9, [2, 4, 8]),
        ((2, 2, 10), 10, [2, 4, 8, 10]),
    ],
    ids=lambda v: str(v).replace(" ", ""),
)
def test_rung_levels_up_to(
    args: tuple[int, int, int | None], up_to: int, expected: list[int]
) -> None:
    assert _levels(args, up_to=up_to) == expected


def test_unbounded_ladder_needs_up_to() -> None:
    with pytest.raises(ValueError, match=r"The value of `up_to` is None"):
        rung_levels(1, reduction_factor=3)


@pytest.mark.parametrize(
    "call",
    [
        lambda: rung_levels(1, 3, 27),  # type: ignore[misc]
        lambda: next_rung_level(0, 1, 3),  # type: ignore[misc]
        lambda: successive_halving_plan(2, 2, 10),  # type: ignore[misc]
    ],
    ids=["rung_levels", "next_rung_level", "successive_halving_plan"],
)
def test_a_call_in_the_old_order_fails_instead_of_meaning_another_ladder(
    call: Callable[[], object],
) -> None:
    # max_resource and reduction_factor are keyword-only where the order used to be
    # (min_resource, reduction_factor, max_resource): such a call must not run.
    with pytest.raises(TypeError, match="positional argument"):
        call()


@pytest.mark.parametrize(
    ("step", "args", "expected"),
    [
        (0, (1, 3, None), 1),
        (1, (1, 3, None), 3),
        (2, (1, 3, None), 3),
        (9, (1, 3, None), 27),
        (10**12, (1, 3, None), 3**26),
        (0, (2, 2, 10), 2),
        (7, (2, 2, 10), 8),
        (8, (2, 2, 10), 10),
        (9, (2, 2, 10), 10),
        (10, (2, 2, 10), None),
        (11, (2, 2, 10), None),
        (26, (1, 3, 27), 27),
        (27, (1, 3, 27), None),
    ],
    ids=lambda v: str(v).replace(" ", ""),
)
def test_next_rung_level(
    step: int, args: tuple[int, int, int | None], expected: int | None
) -> None:
    min_resource, eta, max_resource = args
    assert next_rung_level(step, min_resource, max_resource=max_resource,
                           reduction_factor=eta) == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((2, 2, 10), [(2, 8), (4, 4), (8, 2), (10, 1)]),
        ((1, 3, 27), [(1, 27), (3, 9), (9, 3), (27, 1)]),
        ((1, 2, 1), [(1, 1)]),
        ((4, 3, 4), [(4, 1)]),
        ((1, 3, 10), [(1, 27), (3, 9), (9, 3), (10, 1)]),
        ((1, 4, 16), [(1, 16), (4, 4), (16, 1)]),
        ((1, 2, 3), [(1, 4), (2, 2), (3, 1)]),
    ],
    ids=lambda v: str(v).replace(" ", ""),
)
def test_successive_halving_plan(args: tuple[int, int, int], expected: list) -> None:
    plan = _plan(args)
    assert plan == expected
    assert [level for level, _ in plan] == _levels(args)
    eta = args[1]
    assert all(n == max(1, prev // eta) for (_, prev), (_, n) in zip(plan, plan[1:], strict=False))
    assert plan[-1][1] == 1


@pytest.mark.parametrize(
    ("levels", "previous", "step", "expected"),
    [
        ([1, 3, 9, 27], 0, 0, []),
        ([1, 3, 9, 27], 0, 1, [1]),
        ([1, 3, 9, 27], 1, 2, []),
        ([1, 3, 9, 27], 2, 3, [3]),
        ([1, 3, 9, 27], 0, 27, [1, 3, 9, 27]),
        ([1, 3, 9, 27], 2, 10, [3, 9]),
        ([1, 3, 9, 27], 3, 3, []),
        ([1, 3, 9, 27], 9, 5, []),
        ([1, 3, 9, 27], 27, 100, []),
        ([2, 4, 8, 10], 0, 1, []),
        ([2, 4, 8, 10], 1, 2, [2]),
        ([2, 4, 8, 10], 0, 5, [2, 4]),
        ([2, 4, 8, 10], 8, 10, [10]),
        ([], 0, 10, []),
    ],
    ids=lambda v: str(v).replace(" ", ""),
)
def test_crossed_rungs(levels: list[int], previous: int, step: int, expected: list[int]) -> None:
    assert crossed_rungs(levels, previous, step) == expected


def test_crossed_rungs_over_consecutive_reports_cover_each_rung_once() -> None:
    levels = rung_levels(2, max_resource=100, reduction_factor=2)
    for stride in range(1, 12):
        steps = list(range(stride, 101, stride))
        seen = [
            level
            for previous, step in zip([0, *steps], steps, strict=False)
            for level in crossed_rungs(levels, previous, step)
        ]
        assert seen == [level for level in levels if level <= steps[-1]]


# -- synchronous rounds: (min_resource, max_resource, reduction_factor, prefact) ----------------


def _round(
    min_resource: int, max_resource: int, reduction_factor: int, prefact: int = 1, **kwargs: int
) -> list[tuple[int, int]]:
    return successive_halving_plan(min_resource, max_resource=max_resource,
                                   reduction_factor=reduction_factor, prefact=prefact, **kwargs)


_PLANS = {
    (2, 10, 2, 1): [(2, 8), (4, 4), (8, 2), (10, 1)],
    (1, 10, 3, 1): [(1, 27), (3, 9), (9, 3), (10, 1)],
    (1, 1000, 10, 1): [(1, 1000), (10, 100), (100, 10), (1000, 1)],
    (1, 999, 10, 1): [(1, 1000), (10, 100), (100, 10), (999, 1)],
    (1, 27, 3, 2): [(1, 54), (3, 18), (9, 6), (27, 2)],
    (1, 243, 3, 1): [(1, 243), (3, 81), (9, 27), (27, 9), (81, 3), (243, 1)],
    (3, 3, 2, 1): [(3, 1)],
    (3, 3, 2, 4): [(3, 4)],
    (5, 6, 5, 1): [(5, 5), (6, 1)],
    (2, 9, 5, 3): [(2, 15), (9, 3)],
}


@pytest.mark.parametrize(("args", "plan"), list(_PLANS.items()),
                         ids=["-".join(map(str, a)) for a in _PLANS])
def test_successive_halving_plan_of_a_round(
    args: tuple[int, int, int, int], plan: list[tuple[int, int]]
) -> None:
    min_resource, max_resource, eta, prefact = args
    assert _round(*args) == plan
    levels = [level for level, _ in plan]
    assert levels == rung_levels(min_resource, max_resource=max_resource, reduction_factor=eta)
    assert plan[0][1] == prefact * eta ** (len(levels) - 1) and plan[-1][1] == prefact
    assert all(plan[k + 1][1] == plan[k][1] // eta for k in range(len(plan) - 1))


def test_integer_rungs_where_the_float_log_is_one_short() -> None:
    assert int(math.log(1000) / math.log(10)) == 2  # the textbook's K, off by one
    assert len(_round(1, 1000, 10)) == 4 and _round(1, 1000, 10)[0] == (1, 1000)


@pytest.mark.parametrize(
    ("args", "resume", "epochs"),
    [((2, 10, 2), True, 34), ((2, 10, 2), False, 58),
     ((1, 27, 3), True, 27 + 9 * 2 + 3 * 6 + 18), ((1, 27, 3), False, 4 * 27),
     ((1, 10, 3), True, 27 + 9 * 2 + 3 * 6 + 1), ((1, 10, 3), False, 27 + 27 + 27 + 10),
     ((3, 3, 2), True, 3), ((3, 3, 2), False, 3)],
    ids=lambda x: str(x),
)
def test_round_epochs(args: tuple[int, int, int], resume: bool, epochs: int) -> None:
    assert round_epochs(_round(*args), resume) == epochs


@pytest.mark.parametrize(("configs", "expected"), [
    (8, [8, 4, 2, 1]), (7, [7, 3, 1, 0]), (3, [3, 1, 0, 0]), (1, [1, 0, 0, 0]), (0, [0] * 4)])
def test_cut_short_plan(configs: int, expected: list[int]) -> None:
    assert [n for _, n in _round(2, 10, 2, configs=configs)] == expected


@pytest.mark.parametrize("args", [(1, 27, 3, 1), (2, 10, 2, 1), (1, 1000, 10, 1), (1, 81, 3, 2),
                                  (3, 3, 2, 1), (1, 16, 4, 3), (2, 9, 5, 1)],
                         ids=lambda a: "-".join(map(str, a)))
def test_hyperband_rounds(args: tuple[int, int, int, int]) -> None:
    min_resource, max_resource, eta, prefact = args
    base = rung_levels(min_resource, max_resource=max_resource, reduction_factor=eta)
    s_max = len(base) - 1
    expected = [(base[s_max - s:], prefact * math.ceil(Fraction(s_max + 1, s + 1) * eta**s))
                for s in range(s_max, -1, -1)]
    assert hyperband_rounds(*args) == expected


def test_hyperband_rounds_literal() -> None:
    assert hyperband_rounds(1, 27, 3) == [([1, 3, 9, 27], 27), ([3, 9, 27], 12), ([9, 27], 6),
                                          ([27], 4)]
    assert hyperband_rounds(2, 10, 2) == [([2, 4, 8, 10], 8), ([4, 8, 10], 6), ([8, 10], 4),
                                          ([10], 4)]
    assert hyperband_rounds(1, 1000, 10)[1] == ([10, 100, 1000], 134)  # ceil(4 / 3 * 100)


# -- invalid arguments ---------------------------------------------------------------------

_BAD = [
    ("min_resource", (0, 3, 27), r"`min_resource` is 0, but must be `min_resource >= 1`"),
    ("min_resource", (-1, 3, 27), r"`min_resource` is -1"),
    ("min_resource", (1.0, 3, 27), r"`min_resource` is 1.0, but must be an integer"),
    ("min_resource", (True, 3, 27), r"`min_resource` is True, but must be an integer"),
    ("min_resource", ("1", 3, 27), r"`min_resource` is '1'"),
    ("reduction_factor", (1, 1, 27), r"^The value of `reduction_factor` is 1, but must be "
     r"`reduction_factor >= 2`\.$"),
    ("reduction_factor", (1, 0, 27), r"`reduction_factor` is 0"),
    ("reduction_factor", (1, 2.5, 27), r"`reduction_factor` is 2.5, but must be an integer"),
    ("reduction_factor", (1, True, 27), r"`reduction_factor` is True"),
    ("max_resource", (2, 2, 1), r"`max_resource` is 1, but must be `max_resource >= min_resource`"),
    ("max_resource", (1, 3, 27.0), r"`max_resource` is 27.0, but must be an integer"),
    ("max_resource", (1, 3, False), r"`max_resource` is False"),
]


@pytest.mark.parametrize(("name", "args", "message"), _BAD, ids=[f"{b[0]}-{b[1]}" for b in _BAD])
def test_rung_levels_rejects(name: str, args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _levels(args)


@pytest.mark.parametrize(("name", "args", "message"), _BAD, ids=[f"{b[0]}-{b[1]}" for b in _BAD])
def test_successive_halving_plan_rejects(name: str, args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _plan(args)


@pytest.mark.parametrize(("name", "args", "message"), _BAD, ids=[f"{b[0]}-{b[1]}" for b in _BAD])
def test_hyperband_brackets_rejects(name: str, args: tuple, message: str) -> None:
    min_resource, eta, max_resource = args
    with pytest.raises(ValueError, match=message):
        hyperband_brackets(min_resource, max_resource, eta)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rung_levels(1, reduction_factor=3, up_to=-1), r"`up_to` is -1"),
        (lambda: rung_levels(1, reduction_factor=3, up_to=2.0), r"`up_to` is 2.0"),
        (lambda: successive_halving_plan(1, max_resource=None, reduction_factor=3),
         r"`max_resource` is None"),
        (lambda: next_rung_level(-1, 1, reduction_factor=3), r"`step` is -1"),
        (lambda: next_rung_level(0, 0, reduction_factor=3), r"`min_resource` is 0"),
        (lambda: bracket_min_resource(1, 3, -1), r"`bracket` is -1"),
        (lambda: bracket_of("s", 0, []), r"`budgets` is \[\]"),
        (lambda: bracket_of("s", 0, [0, 0]), r"`budgets` is \[0, 0\]"),
    ],
    ids=["up_to-neg", "up_to-float", "plan-none", "step-neg", "next-min", "bracket-neg",
         "budgets-empty", "budgets-zero"],
)
def test_other_invalid_arguments(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


# -- Hyperband bookkeeping against Optuna's own -----------------------------------------------

# Cases where Optuna's floating-point log agrees with the exact count.
_HYPERBAND = [(1, 27, 3), (1, 81, 3), (1, 100, 3), (1, 9, 3), (1, 1, 3), (2, 64, 2), (1, 125, 5),
              (3, 100, 3), (1, 10, 2), (5, 50, 3), (1, 26, 3), (4, 4, 4), (1, 728, 3)]


@pytest.mark.parametrize(
    "args", _HYPERBAND, ids=["-".join(map(str, a)) for a in _HYPERBAND]
)
def test_brackets_and_budgets_match_optuna(args: tuple[int, int, int]) -> None:
    optuna = pytest.importorskip("optuna")
    min_resource, max_resource, eta = args
    reference = optuna.pruners.HyperbandPruner(
        min_resource=min_resource, max_resource=max_resource, reduction_factor=eta
    )
    reference._try_initialization(None)  # the private step that fixes its brackets
    assert hyperband_brackets(*args) == reference._n_brackets
    assert trial_allocation_budgets(*args) == reference._trial_allocation_budgets


@pytest.mark.parametrize(("args", "exact"), [((1, 243, 3), 6), ((1, 1000, 10), 4)])
def test_bracket_count_is_exact_where_floating_log_is_not(
    args: tuple[int, int, int], exact: int
) -> None:
    min_resource, max_resource, eta = args
    floating = math.floor(math.log(max_resource / min_resource, eta)) + 1  # Optuna's formula
    assert floating == exact - 1  # one short
    assert hyperband_brackets(*args) == exact
    assert bracket_min_resource(min_resource, eta, exact - 1) == max_resource


def test_bracket_min_resources_stay_within_max_resource() -> None:
    for min_resource, max_resource, eta in _HYPERBAND:
        n = hyperband_brackets(min_resource, max_resource, eta)
        assert bracket_min_resource(min_resource, eta, n - 1) <= max_resource
        assert bracket_min_resource(min_resource, eta, n) > max_resource


@pytest.mark.parametrize(
    "args", [(1, 27, 3), (1, 81, 3), (2, 64, 2)], ids=["1-27-3", "1-81-3", "2-64-2"]
)
def test_bracket_of_matches_optuna(args: tuple[int, int, int]) -> None:
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    min_resource, max_resource, eta = args
    reference = optuna.pruners.HyperbandPruner(
        min_resource=min_resource, max_resource=max_resource, reduction_factor=eta
    )
    study = optuna.create_study(study_name="bracket-check", pruner=reference)
    reference._try_initialization(study)
    budgets = trial_allocation_budgets(*args)
    for number in range(300):
        trial = optuna.trial.create_trial(state=optuna.trial.TrialState.COMPLETE, value=0.0)
        trial.number = number
        assert bracket_of("bracket-check", number, budgets) == reference._get_bracket_id(
            study, trial
        )


def test_bracket_of_is_deterministic_across_processes() -> None:
    budgets = trial_allocation_budgets(1, 81, 3)
    here = [bracket_of("lenet-hyperband", number, budgets) for number in range(200)]
    code = (
        "from lightning_hpo.pruners.rungs import bracket_of, trial_allocation_budgets as b;"
        "print([bracket_of('lenet-hyperband', i, b(1, 81, 3)) for i in range(200)])"
    )
    env = {"PYTHONHASHSEED": "12345"}  # str hashing differs per process; crc32 must not
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, **env})
    assert out.stdout.strip() == str(here)


def test_bracket_of_follows_the_budgets() -> None:
    budgets = trial_allocation_budgets(1, 27, 3)
    counts = [0] * len(budgets)
    for number in range(20_000):
        counts[bracket_of("share", number, budgets)] += 1
    shares = [count / sum(counts) for count in counts]
    for share, budget in zip(shares, budgets, strict=True):
        assert share == pytest.approx(budget / sum(budgets), abs=0.02)


def test_module_has_no_io_and_no_optuna() -> None:
    code = "import sys, lightning_hpo.pruners.rungs; print('optuna' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert sorted(rungs.__all__) == sorted(
        name for name in vars(rungs) if callable(getattr(rungs, name)) and not name.startswith("_")
        and getattr(getattr(rungs, name), "__module__", "") == "lightning_hpo.pruners.rungs"
    )
