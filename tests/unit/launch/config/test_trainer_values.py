"""``launch.config.trainer_values``: the Trainer values Lightning's constructor takes and
only ``fit`` refuses or misreads, checked pure, key by key. Through a config: test_bad_input.py
(the registry's ``trainer:``), test_lightning_cli.py (a project's files, inline and searched)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from lightning_hpo.launch.config.trainer_values import (
    ALLOWED,
    NEEDED,
    batch_count_refusal,
    binding_refusal,
    fit_refusal,
    launcher_refusal,
    needs_batch_count,
    unvalidated_rungs,
)

GOOD: dict[str, list[Any]] = {
    "accumulate_grad_batches": [1, 2, 64],
    "gradient_clip_val": [None, 0, 0.0, 0.5, 5],
    "check_val_every_n_epoch": [None, 1, 3],
    "num_sanity_val_steps": [None, -1, 0, 2],
    "deterministic": [None, True, False, "warn"],
    "detect_anomaly": [True, False],
    "inference_mode": [True, False],
    "sync_batchnorm": [True, False],
    "use_distributed_sampler": [True, False],
    "val_check_interval": [None, 1, 50, 0.25, 1.0, "00:00:10:00", {"minutes": 5}],
}
BAD: dict[str, list[Any]] = {
    "accumulate_grad_batches": [0, -1, 1.5, 2.0, "2", True, None],
    "gradient_clip_val": [-1, -0.1, math.nan, math.inf, "1", True],
    "check_val_every_n_epoch": [0, -1, 1.5, False],
    "num_sanity_val_steps": [-2, 1.5, "all"],
    "deterministic": ["bogus", "true", 1],
    "detect_anomaly": ["false", 0, None],
    "inference_mode": ["false", "true", 1],
    "sync_batchnorm": ["yes", None],
    "use_distributed_sampler": ["false", 0],
    "val_check_interval": [0, 0.0, -1, 1.5, True, [1]],  # 0: ZeroDivisionError in every trial
}


def test_every_checked_key_has_good_and_bad_values_here() -> None:
    assert set(GOOD) == set(BAD) == set(ALLOWED)


@pytest.mark.parametrize(("key", "value"), [(k, v) for k, vs in GOOD.items() for v in vs])
def test_allowed_values_pass(key: str, value: Any) -> None:
    assert fit_refusal(key, value) is None


@pytest.mark.parametrize(("key", "value"), [(k, v) for k, vs in BAD.items() for v in vs])
def test_refused_values_say_what_is_allowed(key: str, value: Any) -> None:
    assert fit_refusal(key, value) == ALLOWED[key][1]


@pytest.mark.parametrize("key", ["precision", "max_epochs", "limit_train_batches", "nope"])
def test_keys_not_checked_here_pass_whatever_their_value(key: str) -> None:
    assert fit_refusal(key, "anything") is None


@pytest.mark.parametrize(
    ("every", "levels", "refused"),
    [
        (1, [1, 3, 9], False),
        (3, [3, 9, 27], False),
        (2, [2, 4, 8, 10], False),
        (2, [1, 3, 9], True),
        (2, [2, 4, 8, 9], True),  # the top rung too: a trial ends ranked there
        (4, [2, 4, 8], True),
        (None, [1, 3, 9], True),  # validates by batches, across epochs
        (0, [1, 3, 9], False),  # fit_refusal's to say, not this rule's
    ],
)
def test_every_rung_a_trial_pauses_at_must_validate(
    every: Any, levels: list[int], refused: bool
) -> None:
    why = unvalidated_rungs(every, levels)
    assert (why is not None) == refused, why
    if refused:
        assert f"pause at epochs {', '.join(map(str, levels))}" in str(why)
        assert "use 1" in str(why)


@pytest.mark.parametrize("key", sorted(NEEDED))
@pytest.mark.parametrize(("value", "refused"), [
    (0, True), (0.0, True), (1, False), (0.25, False), (1.0, False), (None, False),
    (False, False),  # not a number of batches: the Trainer's own check says what it is
])
def test_the_launcher_needs_a_batch_to_train_and_to_validate(
    key: str, value: Any, refused: bool
) -> None:
    assert (launcher_refusal(key, value) == NEEDED[key]) is refused
    assert launcher_refusal("max_epochs", 0) is None  # only the keys of NEEDED


@pytest.mark.parametrize(("trainer", "needed"), [
    ({}, False),
    ({"val_check_interval": 0.5}, False),
    ({"val_check_interval": 1.0}, False),
    ({"val_check_interval": 50}, True),
    ({"val_check_interval": True}, False),  # not a number of batches
    ({"limit_train_batches": 0.25}, True),
    ({"limit_train_batches": 1.0}, False),
    ({"limit_train_batches": 4}, False),
])
def test_the_batch_count_is_needed_only_for_values_counted_in_batches(
    trainer: dict[str, Any], needed: bool
) -> None:
    assert needs_batch_count(trainer) is needed


# Lightning's rules (fit_loop.setup_data, data_connector._parse_num_batches) on an epoch of
# ``batches`` training batches: (trainer values, batches, the field refused or None).
BATCH_CASES: list[tuple[dict[str, Any], int | None, str | None]] = [
    ({"val_check_interval": 23}, 23, None),  # at most an epoch's batches
    ({"val_check_interval": 24}, 23, "trainer.val_check_interval"),
    # Across epochs (Lightning takes it), but the epochs between two validations have no value
    ({"val_check_interval": 24, "check_val_every_n_epoch": None}, 23,
     "trainer.val_check_interval"),
    ({"val_check_interval": 23, "check_val_every_n_epoch": None}, 23, None),
    ({"val_check_interval": 24, "check_val_every_n_epoch": 2}, 23, "trainer.val_check_interval"),
    ({"val_check_interval": 5, "limit_train_batches": 4}, 23, "trainer.val_check_interval"),
    ({"val_check_interval": 4, "limit_train_batches": 4}, 23, None),
    ({"val_check_interval": 4, "limit_train_batches": 40}, 23, None),  # min(23, 40)
    ({"val_check_interval": 6, "limit_train_batches": 0.25}, 23, "trainer.val_check_interval"),
    ({"val_check_interval": 5, "limit_train_batches": 0.25}, 23, None),  # int(23 * 0.25) = 5
    ({"limit_train_batches": 0.04}, 23, "trainer.limit_train_batches"),  # int(0.92) = 0
    ({"limit_train_batches": 0.05}, 23, None),  # int(1.15) = 1
    ({"val_check_interval": 10**6}, None, None),  # the count unknown: the trial says
    ({"val_check_interval": 0.5}, 1, None),
]
VAL_CASES: list[tuple[dict[str, Any], int | None, str | None]] = [
    ({"limit_val_batches": 0.1}, 5, "trainer.limit_val_batches"),  # int(0.5) = 0
    ({"limit_val_batches": 0.2}, 5, None),
    ({"limit_val_batches": 1}, 5, None),
    ({"limit_val_batches": 0.1}, None, None),  # the count unknown
]


@pytest.mark.parametrize(("trainer", "val_batches", "field"), VAL_CASES)
def test_a_validation_fraction_must_leave_a_batch(
    trainer: dict[str, Any], val_batches: int | None, field: str | None
) -> None:
    assert needs_batch_count(trainer) is isinstance(trainer["limit_val_batches"], float)
    refused = batch_count_refusal(trainer, 23, val_batches)
    assert (None if refused is None else refused[0]) == field
    if refused is not None:
        assert refused[1].startswith(f"is {trainer['limit_val_batches']}, which leaves none of "
                                     f"the {val_batches} validation batches: give at least")


@pytest.mark.parametrize(("trainer", "batches", "field"), BATCH_CASES)
def test_values_counted_in_batches_are_checked_against_an_epochs_batches(
    trainer: dict[str, Any], batches: int | None, field: str | None
) -> None:
    refused = batch_count_refusal(trainer, batches)
    assert (None if refused is None else refused[0]) == field
    if refused is not None:
        assert "training batches" in refused[1]
        if field == "trainer.val_check_interval":
            assert refused[1].startswith(f"is {trainer['val_check_interval']}, but an epoch has")
            assert "give at most" in refused[1]
        else:
            assert f"give at least {1 / batches:.3g}" in refused[1]


# Several data modules (a space's ends), each (training batches, validation batches): the index
# of the one said, and the advice ("give at most 6"), which must hold at every end.
BINDING_CASES: list[tuple[dict[str, Any], list[tuple[int | None, int | None]], int | None,
                          str | None]] = [
    ({"val_check_interval": 1000}, [(45, 12), (6, 2)], 1, "give at most 6,"),
    ({"val_check_interval": 1000}, [(6, 2), (45, 12)], 0, "give at most 6,"),
    ({"val_check_interval": 45}, [(45, 12), (6, 2)], 1, "give at most 6,"),  # only one end
    ({"val_check_interval": 6}, [(45, 12), (6, 2)], None, None),
    ({"val_check_interval": 1000}, [(None, None), (6, 2)], 1, "give at most 6,"),
    ({"val_check_interval": 1000}, [(None, None), (None, None)], None, None),  # counts unknown
    ({"val_check_interval": 1000}, [(6, 2), (6, 9)], 0, "give at most 6,"),  # the first of equals
    ({"limit_train_batches": 0.01}, [(45, 12), (12, 3)], 1, "give at least 0.0833,"),
    ({"limit_val_batches": 0.05}, [(12, 3), (45, 12)], 0, "give at least 0.333,"),
    # Fewer validation batches where there are more training batches (val_fraction searched).
    ({"limit_val_batches": 0.05}, [(3, 16), (45, 2)], 1, "give at least 0.5,"),
    # Two fields refused: the one batch_count_refusal names first, at its binding end.
    ({"limit_val_batches": 0.05, "val_check_interval": 10}, [(3, 16), (45, 2)], 1,
     "give at least 0.5,"),
]


@pytest.mark.parametrize(("trainer", "counts", "index", "advice"), BINDING_CASES)
def test_a_refusal_over_several_ends_gives_the_limit_that_binds(
    trainer: dict[str, Any], counts: list[tuple[int | None, int | None]], index: int | None,
    advice: str | None
) -> None:
    refused = binding_refusal(trainer, counts)
    if index is None:
        assert refused is None
        return
    assert refused is not None and refused[0] == index
    assert (refused[1], refused[2]) == batch_count_refusal(trainer, *counts[index])
    assert advice is not None and advice in refused[2]
