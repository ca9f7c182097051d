"""A LightningCLI project's config checked against its own parser before any trial runs.

:func:`check_cli` parses the project's config with the trial's values at the ends and the
middle of every searched range through the project's own CLI (without fitting), and turns what
it refuses into a :class:`~lightning_hpo.errors.ConfigError` on the space key or the config;
:func:`warm_data` prepares the project's data once before the workers start. How a trial is
built through the same CLI is :mod:`lightning_hpo.launch.checks.project`.
"""

from __future__ import annotations

import importlib
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.utilities.model_helpers import is_overridden

from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.checks.project import LINKED_WORDS, build_trial, hand_over, owned_lines
from lightning_hpo.launch.checks.quiet import quiet_lightning
from lightning_hpo.launch.config.cli_spec import (
    CliSpec,
    cli_args,
    flatten,
    format_value,
)
from lightning_hpo.launch.config.trainer_values import (
    ALLOWED,
    NEEDED,
    batch_size_refusal,
    fit_refusal,
    launcher_refusal,
    unvalidated_rungs,
)

__all__ = ["check_cli", "warm_data"]

_logger = logging.getLogger(__name__)


def _ends(dist: Any) -> tuple[Any, Any, Any]:
    """A distribution's low end, middle and high end (a constant three times)."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if isinstance(dist, CategoricalDistribution):
        return dist.choices[0], dist.choices[0], dist.choices[-1]
    if isinstance(dist, IntDistribution):
        return dist.low, (dist.low + dist.high) // 2, dist.high
    if isinstance(dist, FloatDistribution):
        middle = (math.sqrt(dist.low * dist.high) if dist.log else (dist.low + dist.high) / 2)
        return dist.low, middle, dist.high
    return dist, dist, dist


def _on_cpu(spec: CliSpec, values: Mapping[str, Any], trial_dir: Path) -> Any:
    """A trial built on one CPU, without the launcher's callbacks (:func:`build_trial`)."""
    return build_trial(spec, values, trainer_args={"accelerator": "cpu", "devices": 1,
                       "strategy": "auto", "max_epochs": 1, "default_root_dir": str(trial_dir)},
                       callbacks=[], loggers=[], trial_dir=trial_dir, seed=0, max_epochs=1)


def _try(spec: CliSpec, values: Mapping[str, Any], trial_dir: Path) -> None:
    """Build a trial on one CPU (no launcher callbacks) and its optimizers; raise what fails,
    and what Lightning's ``fit`` would refuse in the model: no ``training_step``, or no
    ``configure_optimizers`` where the config gives no ``optimizer:`` either; and a data
    module batch size torch's ``DataLoader`` refuses (:func:`_refuse_batch_size`)."""
    built = _on_cpu(spec, values, trial_dir)
    refused = batch_size_refusal(built.datamodule)
    if refused is not None:
        _refuse_batch_size(spec, values, *refused)
    model = built.model
    for hook, hint in (("training_step", ""),
                       ("configure_optimizers", " and the config gives no optimizer: (e.g. "
                        "optimizer: torch.optim.Adam)")):
        if not is_overridden(hook, model):
            raise ConfigError("config", f"the model {type(model).__name__} has no {hook}()"
                              f"{hint}; Lightning's fit needs one")
    model.configure_optimizers()


def _refuse_batch_size(spec: CliSpec, values: Mapping[str, Any], value: Any, words: str) -> None:
    """Raise for a data module's batch size ``value`` that torch's ``DataLoader`` refuses
    (``words``): the data module took it, and every trial would fail when ``fit`` asks for its
    loader. A searched ``data.[init_args.]batch_size`` is a ``space.<key>`` error (the check
    says which end), one the tune config sets is its own key's; else a ValueError, which the
    check reports as the project's config's (or the searched key without which it builds)."""
    for key in values:
        if key.startswith("data.") and key.rpartition(".")[2] == "batch_size":
            raise ConfigError(f"space.{key}", f"is refused by torch's DataLoader: {words}")
    inline = spec.sections.get("data") or {}
    for key, section in (("data.batch_size", inline), ("data.init_args.batch_size",
                                                       inline.get("init_args"))):
        if isinstance(section, Mapping) and "batch_size" in section:
            raise ConfigError(key, f"is {value!r}, which torch's DataLoader refuses: {words}")
    raise ValueError(f"data.batch_size is {value!r}, which torch's DataLoader refuses: {words}")


def warm_data(spec: CliSpec, space: Mapping[str, Any], scratch: Path) -> Any:
    """The project's data module, built through its CLI with every space key at the middle of
    its range (a worker's warm-up: the project's imports, and its data to prefetch)."""
    with quiet_lightning():
        return _on_cpu(spec, {name: _ends(dist)[1] for name, dist in space.items()},
                       scratch).datamodule


def check_cli(spec: CliSpec, space: Mapping[str, Any], scratch: Path,
              max_epochs: int | None = None, pauses: Sequence[int] = ()) -> list[str]:
    """Check the project's entry point, files and every space key against its CLI (see
    :func:`_check_cli`; ``pauses``: the epochs at which the schedule pauses trials, each of
    which must validate), with Lightning's per-Trainer lines off."""
    with quiet_lightning():
        return _check_cli(spec, space, scratch, max_epochs, pauses)


def _check_cli(spec: CliSpec, space: Mapping[str, Any], scratch: Path,
               max_epochs: int | None, pauses: Sequence[int] = ()) -> list[str]:
    """Check the project's entry point, files and every space key against its CLI.

    A trial is built with every key at the middle of its range, then with every key at its low
    end, then at its high end (three builds, a fraction of a second each). Where an end is
    refused, each key is tried at that end with every other key at its middle, which names the
    key: a key the parser does not know, a value its type does not take (a float range for an
    ``int``) or one its class refuses (also when building the optimizer and scheduler) is a
    ``space.<key>`` error (ends refused only together are let through: trials rarely draw
    them); a key refused only with another's end (an argument the class chosen at the end of
    ``model.class_path`` does not take) is named with that end. Nothing is written but under
    ``scratch`` (a temporary folder).

    Returns:
        One line per Trainer argument of the project's config that the launcher replaces
        (:func:`owned_lines`; ``max_epochs`` when it differs from the study's), and one for its
        ``ckpt_path``.

    Raises:
        ConfigError: naming ``cli``, ``config`` or ``space.<key>``.
    """
    for path in spec.files:
        if not Path(path).is_file():
            what = "a folder, not a file" if Path(path).is_dir() else "no such file"
            raise ConfigError("config", f"cannot read {path}: {what} (paths are relative to "
                              f"the folder the launcher runs in, {Path.cwd()})")
    _check_class_paths(spec)
    ends = {name: _ends(dist) for name, dist in space.items()}
    middle = {name: three[1] for name, three in ends.items()}
    try:
        _try(spec, middle, scratch)
    except ConfigError as error:
        name = error.field.removeprefix("space.")
        if name not in middle:
            raise
        if error.message.startswith(LINKED_WORDS):  # no value of it would do
            raise
        if "unrecognized arguments" in error.message:  # a key the CLI does not have
            known = _known_keys(spec, name, middle)
            raise ConfigError(error.field, f"is not a key of the CLI; {known}") from None
        theirs = _refused_anyway(spec, middle, name, scratch)
        if theirs is not None:  # the parser named a section; a fixed value in it is refused
            raise theirs from None
        raise ConfigError(error.field, f"the middle {format_value(middle[name])} of its range "
                          f"{error.message}") from None
    except Exception as error:
        raise _middle_refused(spec, middle, scratch, error) from None
    for end, label in ((0, "low"), (2, "high")):
        try:  # every key at this end together: one build where the ends are fine (the rule)
            _try(spec, {name: three[end] for name, three in ends.items()}, scratch)
            continue
        except Exception:  # noqa: BLE001 (each key alone says which one, below)
            pass
        for name, three in ends.items():
            value = three[end]
            try:
                _try(spec, {**middle, name: value}, scratch)
            except ConfigError as error:
                if error.field == f"space.{name}":
                    raise ConfigError(error.field, f"the {label} end {format_value(value)} "
                                      f"{error.message}") from None
                if error.field.removeprefix("space.") in middle:  # another key, at its middle:
                    # refused with this one's end (a class chosen that lacks that argument)
                    raise ConfigError(error.field, f"with space.{name} at its {label} end "
                                      f"{format_value(value)}, it {error.message}") from None
                raise
            except Exception as error:
                raise ConfigError(f"space.{name}", f"the {label} end {format_value(value)} is "
                                  f"refused: {type(error).__name__}: {error}") from None
    handed = hand_over(spec.entry, cli_args(spec, middle), adjust=None, trainer_args=None,
                        parse_only=True, seed=None)
    _check_fit_values(spec, handed.cli.config["fit.trainer"], ends)
    if pauses:
        _check_validation_at(pauses, spec, handed.cli.config["fit.trainer"], ends)
    return [*owned_lines(handed.cli.config["fit.trainer"], max_epochs),
            *_ckpt_line(handed.cli)]


def _ckpt_line(cli: LightningCLI) -> list[str]:
    """The line that says a ``ckpt_path`` of the project's config is not resumed from (see
    :func:`_intercept`): the launcher's ``fit`` takes a trial's own resume checkpoint, or
    none, and the trial's ``config.yaml`` says ``ckpt_path: null``."""
    given = getattr(cli, "_lightning_hpo_ckpt_path", None)
    if given is None:
        return []
    return [f"ckpt_path={given} in the project's config is replaced: each trial trains from its "
            "start (it resumes from its own checkpoint only)"]


def _check_class_paths(spec: CliSpec) -> None:
    """Each ``class_path: package.module.Class`` of the tune config's own sections names a
    class that imports: the CLI's parser reports one that does not on the first key it parses,
    which the check took for a space key's fault. A bare name (``LeNet``) is the parser's to
    resolve."""
    for section, content in spec.sections.items():
        path = content.get("class_path") if isinstance(content, Mapping) else None
        if not isinstance(path, str) or "." not in path:
            continue
        module_name, _, class_name = path.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except Exception as error:  # ModuleNotFoundError, or the module's own error
            raise ConfigError(f"{section}.class_path", f"is {path!r}, but module "
                              f"{module_name!r} cannot be imported: {type(error).__name__}: "
                              f"{error}") from None
        if not hasattr(module, class_name):
            raise ConfigError(f"{section}.class_path", f"is {path!r}, but module "
                              f"{module_name!r} has no {class_name!r}")


def _check_validation_at(pauses: Sequence[int], spec: CliSpec, trainer: Any,
                         ends: Mapping[str, tuple[Any, Any, Any]]) -> None:
    """Each epoch the schedule pauses trials at validates
    (:func:`~lightning_hpo.launch.config.trainer_values.unvalidated_rungs`): the project's files
    (``config``), the tune config's ``trainer.check_val_every_n_epoch``, or a searched range
    (which may not be searched at all, its values being each trial's)."""
    name = "trainer.check_val_every_n_epoch"
    if name in ends:
        raise ConfigError(f"space.{name}", f"cannot be searched: trials pause at epochs "
                          f"{', '.join(map(str, pauses))} and are ranked there by that "
                          "epoch's value, so every trial validates each epoch (1)")
    if "check_val_every_n_epoch" not in trainer:  # a CLI without it
        return
    value = trainer.get("check_val_every_n_epoch")
    why = unvalidated_rungs(value, pauses)
    if why is None:
        return
    if "check_val_every_n_epoch" in (spec.sections.get("trainer") or {}):
        raise ConfigError(name, why)
    raise ConfigError("config", f"{name} in the project's config {why}")


def _check_fit_values(spec: CliSpec, trainer: Any, ends: Mapping[str, tuple[Any, Any, Any]],
                      ) -> None:
    """The Trainer values the project's CLI takes and Lightning's ``fit`` refuses or misreads
    (:func:`~lightning_hpo.launch.config.trainer_values.fit_refusal`), or the launcher cannot run
    (:func:`~lightning_hpo.launch.config.trainer_values.launcher_refusal`: no batch to train or
    validate): a searched one by its range's ends, one the tune config sets inline by its
    ``trainer.<key>``, else the project's files (``config``)."""
    inline = spec.sections.get("trainer") or {}
    for key in (*NEEDED, *ALLOWED):
        name = f"trainer.{key}"
        if name in ends:
            for end, label in ((0, "low"), (2, "high")):
                refused = _fit_value_refusal(key, ends[name][end])
                if refused is not None:
                    raise ConfigError(f"space.{name}", f"the {label} end "
                                      f"{format_value(ends[name][end])} is refused: {refused[1]}")
            continue
        if key not in trainer:  # a CLI without this Trainer argument: nothing to check
            continue
        value = trainer.get(key)
        refused = _fit_value_refusal(key, value)
        if refused is None:
            continue
        if key in inline:
            raise ConfigError(name, f"is {value!r}, but {refused[0]}")
        raise ConfigError("config", f"{name} is {value!r} in the project's config, but "
                          f"{refused[1]}")


def _fit_value_refusal(key: str, value: Any) -> tuple[str, str] | None:
    """Why Trainer argument ``key`` cannot be ``value`` in a trial (the launcher's reason
    first, then Lightning's), worded after an inline value's "is 0, but" and after the
    project's files' (or a searched end's): None when it can."""
    why = launcher_refusal(key, value)
    if why is not None:
        return why, why
    allowed = fit_refusal(key, value)
    return None if allowed is None else (f"must be {allowed}",
                                         f"Lightning's fit takes {allowed}")


def _known_keys(spec: CliSpec, name: str, middle: Mapping[str, Any], most: int = 24) -> str:
    """``its model keys: model.hidden_dim, ...``: the keys the CLI has in ``name``'s section
    (parsed without ``name``), for an error about a key it does not have."""
    section = name.partition(".")[0]
    rest = {key: value for key, value in middle.items() if key != name}
    handed = hand_over(spec.entry, cli_args(spec, rest), adjust=None, trainer_args=None,
                        parse_only=True, seed=None)
    if handed.error is not None:
        return "the CLI's parser lists its keys with: python main.py fit --help"
    keys = [key for key in flatten(handed.cli.config["fit"].as_dict())
            if key == section or key.startswith(section + ".")]
    if not keys:
        return f"it has no {section} section"
    more = f", ... ({len(keys) - most} more)" if len(keys) > most else ""
    return f"its {section} keys: {', '.join(keys[:most])}{more}"


def _refused_anyway(spec: CliSpec, middle: Mapping[str, Any], name: str,
                    scratch: Path) -> ConfigError | None:
    """What to report instead of blaming space key ``name`` for the parser's refusal of the
    middle build, when it is not ``name``'s: the parser names a section (``model``), not the
    value it refuses in it, and the build fails without ``name`` too and with no searched
    value at all (a fixed ``init_args`` value of the tune config or the project's files).
    None: ``name`` is to blame (or no build without it says otherwise)."""
    try:
        _try(spec, {key: value for key, value in middle.items() if key != name}, scratch)
        return None  # builds without it: it is the key's
    except Exception:  # noqa: BLE001 (refused without it too: is it the config alone?)
        pass
    try:
        _try(spec, {}, scratch)
    except ConfigError as error:
        return error if error.field == "config" else None
    except Exception as error:  # noqa: BLE001
        return _own_config_refused(spec, error)
    return None


def _own_config_refused(spec: CliSpec, error: Exception) -> ConfigError:
    """``config: the project refuses its own config (...)``, ``error`` its reason."""
    what = " + ".join(spec.files) or "the tune config's sections"
    return ConfigError("config", f"the project refuses its own config ({what}) as fit builds "
                       f"it, before any searched value: {type(error).__name__}: {error}")


def _middle_refused(spec: CliSpec, middle: dict[str, Any], scratch: Path,
                    error: Exception) -> ConfigError:
    """The key to blame when the project refuses the middle of every range: the one whose
    removal (its default from the config files) makes the trial build."""
    reason = f"{type(error).__name__}: {error}"
    for name, value in middle.items():
        rest = {key: other for key, other in middle.items() if key != name}
        try:
            _try(spec, rest, scratch)
        except Exception:  # noqa: S112 (not this key: try the next)
            continue
        return ConfigError(f"space.{name}", f"the middle {format_value(value)} of its range is "
                           f"refused: {reason}")
    try:  # the project's config alone, no value of the space: it is the config itself
        _try(spec, {}, scratch)
    except Exception:  # noqa: BLE001
        return _own_config_refused(spec, error)
    return ConfigError("space", f"the project refuses a trial with every value at the middle "
                       f"of its range ({middle}): {reason}")
