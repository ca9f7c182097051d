"""Trainer values Lightning's ``Trainer(...)`` takes and only ``fit`` refuses, or never does.

The launcher checks a config's ``trainer.*`` values by building a Trainer with each
(:func:`~lightning_hpo.launch.checks.check_against_registry`), and a LightningCLI project's by
building its trial (:mod:`~lightning_hpo.launch.checks.project`). Some values pass both and fail
every trial once it trains (``accumulate_grad_batches: 0``), or train wrongly without a word
(``gradient_clip_val: -1`` clips to a negative norm, which flips every gradient; a flag given as
the string ``"false"`` is true): those are checked here, pure, against :data:`ALLOWED`. So is
a data module's batch size, which its constructor may take and only the ``DataLoader`` that
``fit`` asks for refuses (:func:`batch_size_refusal`).

Example::

    >>> fit_refusal("accumulate_grad_batches", 0)
    'an integer >= 1'
    >>> fit_refusal("accumulate_grad_batches", 4) is None
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeGuard

from lightning_hpo.errors import is_finite_number

__all__ = [
    "ALLOWED", "NEEDED", "batch_count_refusal", "batch_size_refusal", "binding_refusal",
    "fit_refusal",
    "launcher_refusal", "needs_batch_count", "unvalidated_end", "unvalidated_rungs",
]


def _int_at_least(low: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low


def _number_at_least_zero(value: Any) -> bool:
    return is_finite_number(value) and value >= 0


def _flag(value: Any) -> bool:
    return isinstance(value, bool)


def _validation_interval(value: Any) -> bool:
    """``val_check_interval``: batches (>= 1), a fraction of an epoch (0, 1], a duration (a
    string or mapping, which the Trainer checks), or null. The Trainer takes 0, and fit
    divides by it."""
    if value is None or isinstance(value, str | Mapping):
        return True
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return value >= 1 if isinstance(value, int) else 0 < value <= 1


def _or_none(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or test(v)


#: Trainer argument -> (test of a value, what is allowed, in words).
ALLOWED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "accumulate_grad_batches": (_int_at_least(1), "an integer >= 1"),
    "gradient_clip_val": (_or_none(_number_at_least_zero), "a number >= 0, or null (no clipping)"),
    "check_val_every_n_epoch": (_or_none(_int_at_least(1)),
                                "an integer >= 1, or null (validate by val_check_interval)"),
    "num_sanity_val_steps": (_or_none(_int_at_least(-1)), "an integer >= -1 (-1: every batch)"),
    "deterministic": (lambda v: v is None or isinstance(v, bool) or v == "warn",
                      "true, false, 'warn' or null"),
    "detect_anomaly": (_flag, "true or false"),
    "inference_mode": (_flag, "true or false"),
    "sync_batchnorm": (_flag, "true or false"),
    "use_distributed_sampler": (_flag, "true or false"),
    "val_check_interval": (_validation_interval, "an integer >= 1 (batches), a fraction of an "
                           "epoch in (0, 1], or null; fit divides by it"),
}


def fit_refusal(key: str, value: Any) -> str | None:
    """What :data:`ALLOWED` allows for Trainer argument ``key`` when ``value`` is not it; None
    when it is, or when ``key`` is not one checked here.

    Example::

        >>> fit_refusal("gradient_clip_val", -1), fit_refusal("precision", "bogus")
        ('a number >= 0, or null (no clipping)', None)
    """
    rule = ALLOWED.get(key)
    if rule is None:
        return None
    test, words = rule
    return None if test(value) else words


def batch_size_refusal(datamodule: Any) -> tuple[Any, str] | None:
    """``(batch size, torch's words)`` when the batch size of ``datamodule`` is one that torch's
    ``DataLoader`` refuses (``0``, ``-1``, ``2.5``, ``"64"``): None when it takes it, and for a
    data module without one. The batch size is the module's ``batch_size`` attribute, else its
    ``hparams.batch_size``, where Lightning's batch-size finder reads it; ``None`` (a loader
    without batching) is taken. Imports torch.

    Example::

        >>> from types import SimpleNamespace
        >>> batch_size_refusal(SimpleNamespace(batch_size=0))
        (0, 'batch_size should be a positive integer value, but got batch_size=0')
        >>> batch_size_refusal(SimpleNamespace(batch_size=32)), batch_size_refusal(object())
        (None, None)
    """
    from torch.utils.data import BatchSampler

    hparams = getattr(datamodule, "hparams", None)
    if hasattr(datamodule, "batch_size"):
        value = datamodule.batch_size
    elif isinstance(hparams, Mapping) and "batch_size" in hparams:
        value = hparams["batch_size"]
    else:
        return None
    if value is None:
        return None
    try:
        BatchSampler(range(1), value, drop_last=False)  # the check DataLoader(...) makes
    except (TypeError, ValueError) as error:
        return value, str(error)
    return None


#: Trainer argument -> why the launcher cannot run a trial with it at 0 (Lightning's fit can:
#: it then trains nothing, or never validates, and every trial fails once it ran).
NEEDED: dict[str, str] = {
    "limit_train_batches": "a trial must train: leave it out or give at least 1 batch",
    "limit_val_batches": "the launcher reads the metric from each epoch's validation: leave it "
                         "out or give at least 1 batch",
}


def launcher_refusal(key: str, value: Any) -> str | None:
    """Why the launcher refuses Trainer argument ``key`` at ``value`` (:data:`NEEDED`: 0 or
    0.0 batches); None otherwise.

    Example::

        >>> launcher_refusal("limit_train_batches", 0.0)
        'a trial must train: leave it out or give at least 1 batch'
        >>> launcher_refusal("limit_train_batches", 0.25) is None
        True
    """
    zero = value == 0 and isinstance(value, int | float) and not isinstance(value, bool)
    return NEEDED.get(key) if zero else None


def unvalidated_rungs(every: Any, levels: Sequence[int]) -> str | None:
    """Why ``check_val_every_n_epoch: every`` cannot run a schedule that pauses trials at the
    epochs ``levels`` (``sync_*``, ``mode: promotion``), which ranks each trial there by the value
    of the epoch it paused after; None when every rung is validated (``every`` divides each).
    ``null`` validates by ``val_check_interval``'s batches, across epochs: not at rungs.

    Example::

        >>> unvalidated_rungs(3, [3, 9, 27]) is None, unvalidated_rungs(1, [1, 3, 9]) is None
        (True, True)
        >>> print(unvalidated_rungs(2, [1, 3, 9]))
        validates every 2 epochs, but trials pause at epochs 1, 3, 9 and are ranked there by
        that epoch's value: use 1, or rungs that are multiples of 2 (pruner.min_resource,
        pruner.reduction_factor)
    """
    paused = (f"trials pause at epochs {', '.join(map(str, levels))} and are ranked there by "
              "that epoch's value")
    if every is None:
        return ("is null (validate by val_check_interval's batches, across epochs), but "
                f"{paused}: use 1")
    if not isinstance(every, int) or isinstance(every, bool) or every < 1:
        return None  # fit_refusal's to say
    if all(level % every == 0 for level in levels):
        return None
    return (f"validates every {every} epochs, but {paused}: use 1, or rungs that are multiples "
            f"of {every} (pruner.min_resource, pruner.reduction_factor)")


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def needs_batch_count(trainer: Mapping[str, Any]) -> bool:
    """Whether ``trainer``'s values can only be checked against an epoch's number of batches
    (:func:`batch_count_refusal`): ``val_check_interval`` in batches (an integer), or
    ``limit_train_batches`` / ``limit_val_batches`` as a fraction below 1.

    Example::

        >>> needs_batch_count({"val_check_interval": 50}), needs_batch_count({})
        (True, False)
    """
    return _is_int(trainer.get("val_check_interval")) or any(
        isinstance(limit, float) and 0 < limit < 1
        for limit in (trainer.get("limit_train_batches"), trainer.get("limit_val_batches")))


def batch_count_refusal(trainer: Mapping[str, Any], batches: int | None,
                        val_batches: int | None = None) -> tuple[str, str] | None:
    """``(field, why)`` when ``trainer``'s values fail every trial whose epochs have ``batches``
    training batches (and ``val_batches`` validation batches), as Lightning's ``fit`` refuses
    them once the data is loaded; None when they do not, or the counts are unknown.

    Lightning's rules: ``limit_train_batches`` cuts an epoch to that many batches (an integer)
    or to ``int(batches * fraction)``, which must leave at least one (so must
    ``limit_val_batches`` of the validation batches); an integer
    ``val_check_interval`` must be at most that many, unless ``check_val_every_n_epoch`` is
    null (validation then counts batches across epochs). The launcher asks the same with null:
    it reads every epoch's value, and an epoch without a validation has none (a trial whose
    epochs all pass without one fails: its metric was never logged).

    Example::

        >>> field, why = batch_count_refusal({"val_check_interval": 50}, 23)
        >>> print(field, why)
        trainer.val_check_interval is 50, but an epoch has 23 training batches: give at most
        23, or a fraction of an epoch (e.g. 0.5)
        >>> batch_count_refusal({"val_check_interval": 50, "check_val_every_n_epoch": None}, 23)[0]
        'trainer.val_check_interval'
        >>> batch_count_refusal({"limit_train_batches": 0.01}, 23)[0]
        'trainer.limit_train_batches'
    """
    refused = (_none_left(trainer, "limit_val_batches", val_batches, "the", "validation")
               or _none_left(trainer, "limit_train_batches", batches, "an epoch's", "training"))
    if refused is not None or batches is None or batches <= 0:
        return refused
    limit = trainer.get("limit_train_batches", 1.0)
    per_epoch = batches
    if _is_int(limit):
        per_epoch = min(batches, limit)
    elif isinstance(limit, float):
        per_epoch = int(batches * limit)
    interval = trainer.get("val_check_interval")
    if not _is_int(interval) or interval <= per_epoch:
        return None
    across = ("" if trainer.get("check_val_every_n_epoch", 1) is not None else
              ", and with check_val_every_n_epoch: null the epochs between two validations "
              "would have no value to report (trials are judged by each epoch's)")
    return ("trainer.val_check_interval",
            f"is {interval}, but an epoch has {per_epoch} training batches{across}: give at "
            f"most {per_epoch}, or a fraction of an epoch (e.g. 0.5)")


def binding_refusal(trainer: Mapping[str, Any], counts: Sequence[tuple[int | None, int | None]]
                    ) -> tuple[int, str, str] | None:
    """:func:`batch_count_refusal` over several data modules (the ends of a space), each
    ``(batches, val_batches)`` in ``counts``: ``(index, field, why)`` of the one whose limit
    binds, None when none is refused. A refusal at one end holds at every end with fewer
    batches, and the fewest set the limit to keep to (``give at most 6``, not 45): of the first
    field :func:`batch_count_refusal` names, the end with the fewest batches it counts
    (validation batches for ``limit_val_batches``), the first of equals.

    Example::

        >>> index, field, why = binding_refusal({"val_check_interval": 50}, [(45, 12), (6, 2)])
        >>> print(index, field, why)
        1 trainer.val_check_interval is 50, but an epoch has 6 training batches: give at most
        6, or a fraction of an epoch (e.g. 0.5)
        >>> binding_refusal({"val_check_interval": 6}, [(45, 12), (6, 2)]) is None
        True
    """
    order = ("trainer.limit_val_batches", "trainer.limit_train_batches",
             "trainer.val_check_interval")
    found = []
    for index, (batches, val_batches) in enumerate(counts):
        refused = batch_count_refusal(trainer, batches, val_batches)
        if refused is not None:
            counted = val_batches if refused[0] == "trainer.limit_val_batches" else batches
            rank = order.index(refused[0]) if refused[0] in order else len(order)
            found.append((rank, counted or 0, index, refused))
    if not found:
        return None
    _, _, index, (field, why) = min(found, key=lambda item: item[:3])
    return index, field, why


def unvalidated_end(every: Any, max_epochs: int) -> str | None:
    """Why ``check_val_every_n_epoch: every`` leaves a trial's last epoch (``max_epochs``, what
    a COMPLETE trial trains) without a validation; None when ``every`` divides it (or is not
    an integer >= 1: :func:`fit_refusal`'s to say). The trial would end with the value, and
    the best checkpoint, of an earlier epoch.

    Example::

        >>> unvalidated_end(2, 8) is None, unvalidated_end(None, 3) is None
        (True, True)
        >>> print(unvalidated_end(2, 9))
        validates every 2 epochs, but trials train up to 9 (pruner.max_resource): the last
        epoch would not validate, and a COMPLETE trial would keep epoch 8's value: use a
        divisor of 9
    """
    if not _is_int(every) or every < 1 or max_epochs % every == 0:
        return None
    return (f"validates every {every} epochs, but trials train up to {max_epochs} "
            "(pruner.max_resource): the last epoch would not validate, and a COMPLETE trial "
            f"would keep epoch {max_epochs - max_epochs % every}'s value: use a divisor of "
            f"{max_epochs}")


def _none_left(trainer: Mapping[str, Any], key: str, batches: int | None, whose: str,
               what: str) -> tuple[str, str] | None:
    """``(field, why)`` when the fraction ``trainer[key]`` of ``batches`` is 0 batches
    (Lightning: ``int(batches * fraction)``, which must leave one); None otherwise."""
    limit = trainer.get(key, 1.0)
    if (batches is None or batches <= 0 or not isinstance(limit, float) or limit <= 0
            or int(batches * limit) > 0):
        return None
    return (f"trainer.{key}", f"is {limit}, which leaves none of {whose} {batches} {what} "
            f"batches: give at least {1 / batches:.3g}, or a number of batches (an integer)")
