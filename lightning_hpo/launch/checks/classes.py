"""The config against the real classes: build the model and data module, try the values.

:func:`check_against_registry` builds the model and the data module the config names (or the
project's LightningCLI objects) at the ends of every searched range, and checks the
hyperparameter names, the values, the Trainer arguments and the logged metric. It imports torch
and Lightning when called, so the launcher's own process pays for them only when it checks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lightning_hpo.errors import (
    ConfigError,
)
from lightning_hpo.launch.config import (
    SAMPLERS,
    Config,
    pause_levels,
    range_end,
    sampler_class,
    sampler_kwargs,
)
from lightning_hpo.launch.config.cli_spec import (
    OWNED_TRAINER,
)

if TYPE_CHECKING:
    from optuna.samplers import BaseSampler



def check_against_registry(cfg: Config) -> list[str]:
    """Check the model, data, hyperparameter names, values and metric against the real classes.

    Builds the model and the data module once at the low end and once at the high end of every
    range, so a fixed argument or a range the class refuses (``dropout_1: {uniform: [0, 1.5]}``)
    is reported before anything runs (a data module's batches are counted at both ends where
    the Trainer's values need them, and a refusal is said at the end with the fewest: its limit
    is the one to keep to), and builds the sampler once (a ``"package.module:Class"``
    sampler's ``ValueError`` or ``TypeError`` becomes a ``sampler`` error; with several
    objectives it is asked for one trial, so a single-objective sampler is refused). Imports
    torch and Lightning (a few seconds); the launcher calls it once, before anything is written
    to the storage.

    A LightningCLI config (``cfg.cli``) is checked against the project's CLI instead
    (:func:`lightning_hpo.launch.checks.cli_checks.check_cli`: its entry point, files and every
    space key).

    Returns:
        Lines to show once: the Trainer arguments of a project's config the launcher replaces.

    Raises:
        ConfigError: naming ``model.*``, ``data.*``, ``space.*``, ``metric``, ``sampler.*``,
            ``trainer.*``, ``cli`` or ``config``.
    """
    kwargs = sampler_kwargs(cfg, cfg.seed)
    try:
        sampler = sampler_class(cfg.sampler)(**kwargs)
    except ConfigError:  # a class that names its own field
        raise
    except (ValueError, TypeError) as error:
        raise ConfigError("sampler", f"{cfg.sampler!r} refused its arguments {kwargs}: "
                          f"{error}") from error
    if cfg.several:
        _check_sampler_objectives(cfg, sampler)
    from lightning_hpo.launch.config.trainer_values import (
        batch_size_refusal,
        binding_refusal,
        needs_batch_count,
        unvalidated_end,
        unvalidated_rungs,
    )

    levels = pause_levels(cfg)
    if cfg.cli is not None:
        import tempfile

        from lightning_hpo._scratch import scratch_prefix
        from lightning_hpo.launch.checks.cli_checks import check_cli

        with tempfile.TemporaryDirectory(prefix=scratch_prefix("check")) as scratch:
            return check_cli(cfg.cli, cfg.space, Path(scratch), cfg.max_epochs, levels)
    _check_trainer_arguments(cfg.trainer)
    every = cfg.trainer.get("check_val_every_n_epoch", 1)
    why = (unvalidated_rungs(every, levels) if levels else None) or unvalidated_end(
        every, cfg.max_epochs)
    if why is not None:
        raise ConfigError("trainer.check_val_every_n_epoch", why)
    from lightning_hpo.builtin.data import build_datamodule, datamodule_hyperparameters
    from lightning_hpo.builtin.models import build_model, model_class, model_hyperparameters

    model_params = model_hyperparameters(cfg.model)
    data_params = datamodule_hyperparameters(cfg.data)
    for name in cfg.space:
        if name not in model_params and name not in data_params:
            params = {"model": model_params, "data": data_params}.get(name)
            section = (f"; {name} is the section, not one of its arguments: search one of "
                       f"those by its own name (space.{next(iter(params))})" if params else "")
            raise ConfigError(
                f"space.{name}", f"is not a hyperparameter of model {cfg.model} "
                f"({', '.join(model_params)}) or data {cfg.data} ({', '.join(data_params)})"
                f"{section}"
            )
    counted: list[tuple[str, int | None, int | None]] = []  # (which end, its batch counts)
    for end, label in ((0, "low"), (-1, "high")):
        values = {name: range_end(dist, end) for name, dist in cfg.space.items()}
        data_values = {k: v for k, v in values.items() if k in data_params}
        try:
            build_model(cfg.model, **cfg.model_args,
                        **{k: v for k, v in values.items() if k not in data_params})
            data = build_datamodule(cfg.data, **cfg.data_args, **data_values)
        except ConfigError as error:
            key = error.field.partition(".")[2]
            if key in cfg.space:
                raise ConfigError(
                    f"space.{key}", f"the {label} end {values[key]!r} is refused: {error.message}"
                ) from None
            raise
        loader_refused = batch_size_refusal(data)
        if loader_refused is not None:  # the class took it; the DataLoader fit asks for would not
            value, words = loader_refused
            if "batch_size" in data_values:
                raise ConfigError("space.batch_size", f"the {label} end {value!r} is refused by "
                                  f"torch's DataLoader: {words}")
            where = "data.batch_size" if "batch_size" in cfg.data_args else "data"
            shown = "is" if where == "data.batch_size" else f"{cfg.data}: its batch_size is"
            raise ConfigError(where, f"{shown} {value!r}, which torch's DataLoader refuses: "
                              f"{words}")
        if needs_batch_count(cfg.trainer):
            where = "".join(f", data.{k} {v!r}" for k, v in data_values.items())
            counted.append((f"the space's {label} end{where}",
                            *_batch_counts(data, cfg.devices.per_trial)))
    # Said at the end with the fewest batches: its limit is the one every trial keeps to.
    refused = binding_refusal(cfg.trainer, [(train, val) for _, train, val in counted])
    if refused is not None:
        at, field, why = refused
        raise ConfigError(field, f"{why} ({counted[at][0]})")
    logged = getattr(model_class(cfg.model), "LOGGED_METRICS", None)
    optional = getattr(model_class(cfg.model), "OPTIONAL_METRICS", None) or {}
    for index, (metric, _) in enumerate(cfg.objectives):
        where = f"metric[{index}]" if cfg.several else "metric"
        if logged is not None and metric not in logged:
            raise ConfigError(
                where, f"'{metric}' is not logged by {cfg.model}; logged: {', '.join(logged)}"
            )
        flag = optional.get(metric)
        if flag is not None and cfg.model_args.get(flag) is not True and flag not in cfg.space:
            raise ConfigError(where, f"'{metric}' is logged by {cfg.model} only with "
                              f"model.{flag}: true")
    return []


def _check_sampler_objectives(cfg: Config, sampler: BaseSampler) -> None:
    """Refuse a sampler that cannot propose a trial of a study with the config's objectives.

    Optuna's single-objective samplers (``CmaEsSampler``) raise ``ValueError`` when asked for a
    trial of a study with several objectives, so every trial they were asked for would end FAIL
    (only the initial configurations, not sampled, would train). The sampler is asked here for
    one trial of an empty in-memory study with the config's directions and space.

    Raises:
        ConfigError: ``sampler``, with the sampler's own words.
    """
    import optuna

    from lightning_hpo.launch.config.space import suggest

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # not "A new study created in memory"
    try:
        study = optuna.create_study(directions=list(cfg.directions), sampler=sampler)
        suggest(study.ask(), cfg.space)
    except (ValueError, TypeError, NotImplementedError) as error:
        raise ConfigError("sampler", (
            f"{cfg.sampler!r} cannot propose a trial of a study with {len(cfg.directions)} "
            f"objectives ({error}); {', '.join(SAMPLERS)} and optuna.samplers:NSGAIISampler can"
        )) from error
    finally:
        optuna.logging.set_verbosity(verbosity)


def _batch_counts(data: Any, world_size: int) -> tuple[int | None, int | None]:
    """How many training and validation batches one of ``world_size`` DDP ranks gets an epoch
    from the data module ``data`` (set up here once, outside a Trainer), as Lightning counts
    them before ``limit_train_batches`` / ``limit_val_batches``; None for a count that cannot be
    made (its data missing, a loader without a length): the trial then reports what is wrong."""
    try:
        data.setup("fit")
    except Exception:  # noqa: BLE001 (the trial reports it, with the data module's words)
        return None, None
    return (_rank_batches(data.train_dataloader, world_size),
            _rank_batches(data.val_dataloader, world_size))


def _rank_batches(make_loader: Any, world_size: int) -> int | None:
    """One rank's batches of the loader ``make_loader()`` returns (DistributedSampler's share
    of the examples under DDP); None when it has no length."""
    try:
        loader = make_loader()
        batches = len(loader)
    except Exception:  # noqa: BLE001 (no loader, or one without a length)
        return None
    size, sampler = getattr(loader, "batch_size", None), getattr(loader, "sampler", None)
    if world_size > 1 and isinstance(size, int) and size > 0 and hasattr(sampler, "__len__"):
        examples = math.ceil(len(sampler) / world_size)  # type: ignore[arg-type]
        batches = examples // size if getattr(loader, "drop_last", False) else math.ceil(
            examples / size)
    return batches


def _check_trainer_arguments(trainer: Mapping[str, Any]) -> None:
    """Every ``trainer.*`` key is an argument of Lightning's Trainer (imports Lightning)."""
    from lightning.pytorch import Trainer

    from lightning_hpo._registry import init_parameters

    known = list(init_parameters(Trainer))
    for key in trainer:
        if key not in known:
            close = [name for name in known if name not in OWNED_TRAINER and name not in
                     ("callbacks", "logger")]
            raise ConfigError(f"trainer.{key}", "is not an argument of Lightning's Trainer; "
                              f"allowed: {', '.join(close)}")
    from lightning_hpo.launch.config.trainer_values import NEEDED, launcher_refusal

    for key in NEEDED:
        why = launcher_refusal(key, trainer.get(key))
        if why is not None:
            raise ConfigError(f"trainer.{key}", f"is {trainer[key]!r}, but {why}")
    _check_trainer_values(trainer)


def _check_trainer_values(trainer: Mapping[str, Any]) -> None:
    """Each ``trainer.*`` value as Lightning's Trainer takes it (``precision: bogus``,
    ``limit_train_batches: -2``): a Trainer is built on the CPU with each one alone, so that
    the refusal names its key, then with all of them (values that refuse each other); a value
    only a GPU takes is let through. Values the Trainer takes and only ``fit`` refuses, or never
    does, first (:mod:`~lightning_hpo.launch.config.trainer_values`)."""
    import tempfile
    import warnings

    from lightning_hpo._scratch import scratch_prefix
    from lightning_hpo.launch.checks.quiet import quiet_lightning
    from lightning_hpo.launch.config.trainer_values import fit_refusal

    for key, value in trainer.items():
        allowed = fit_refusal(key, value)
        if allowed is not None:
            raise ConfigError(f"trainer.{key}", f"is {value!r}, but must be {allowed}")

    quiet = {"accelerator": "cpu", "devices": 1, "logger": False, "enable_checkpointing": False,
             "enable_progress_bar": False, "enable_model_summary": False}
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("check")) as scratch, \
            warnings.catch_warnings(), quiet_lightning():
        warnings.simplefilter("ignore")
        given = {key: value for key, value in trainer.items()
                 if key not in ("callbacks", "plugins", "max_epochs", "logger")}
        for key, value in given.items():
            message = _trainer_refusal({**quiet, key: value, "default_root_dir": scratch})
            if message is not None:
                raise ConfigError(f"trainer.{key}", f"is {value!r}, which Lightning's Trainer "
                                  f"refuses: {message}")
        # Each value alone passed; some refuse each other (check_val_every_n_epoch: null with
        # a fractional val_check_interval).
        message = (_trainer_refusal({**quiet, **given, "default_root_dir": scratch})
                   if len(given) > 1 else None)
        if message is not None:
            shown = ", ".join(f"{key}: {value!r}" for key, value in given.items())
            raise ConfigError("trainer", f"{shown} together, which Lightning's Trainer refuses: "
                              f"{message}")


def _trainer_refusal(arguments: Mapping[str, Any]) -> str | None:
    """Lightning's words (one line, at most 300 characters) when ``Trainer(**arguments)``
    raises, None when it builds; None too for a refusal that names a GPU (a value for the
    slot's device, not for this CPU check)."""
    from lightning.pytorch import Trainer

    try:
        Trainer(**arguments)
    except Exception as error:  # Lightning's ValueError, TypeError, Misconfiguration
        message = " ".join(str(error).split())
        if re.search(r"\b(cuda|gpu|mps|tpu|accelerator)\b", message, re.IGNORECASE):
            return None
        return message[:300]
    return None
