"""A config that tunes a LightningCLI project as it is: the ``cli:`` and ``config:`` fields.

A project that trains with ``python main.py fit --config config.yaml`` is tuned from a
``tune.yaml`` next to it::

    study: shop
    cli: main:cli_main          # a function that builds the CLI from `args`, or a LightningCLI
                                # subclass (default: lightning.pytorch.cli:LightningCLI)
    config: [config.yaml]       # the files `fit --config` takes, in that order
    metric: val_loss
    space: {model.hidden_dim: {randint: [16, 256]}}   # the CLI's own dotted keys

Each trial is the CLI's ``fit`` config (the files, then the config's own ``model``, ``data``,
``trainer``, ``optimizer`` and ``lr_scheduler`` sections, then the trial's values), parsed and
instantiated by the project's own CLI (:mod:`lightning_hpo.launch.checks.project`); the
launcher owns what it must of the Trainer (:data:`OWNED_TRAINER`). A config is in this mode when
it has ``cli`` or ``config``, or gives ``model`` or ``data`` a ``class_path``. Pure: no torch,
no files read. Example::

    >>> spec = parse_cli({"cli": "main:cli_main", "config": "config.yaml",
    ...                   "trainer": {"gradient_clip_val": 1.0}})
    >>> spec.entry, spec.files, spec.sections
    ('main:cli_main', ('config.yaml',), {'trainer': {'gradient_clip_val': 1.0}})
    >>> cli_args(spec, {"optimizer.init_args.lr": 0.01, "optimizer": "torch.optim.Adam"})
    ... # doctest: +NORMALIZE_WHITESPACE
    ['fit', '--config', 'config.yaml', '--config={"trainer": {"gradient_clip_val": 1.0}}',
     '--optimizer=torch.optim.Adam', '--optimizer.init_args.lr=0.01']
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

from lightning_hpo.errors import ConfigError

__all__ = ["DEFAULT_CLI", "OWNED_TRAINER", "SECTIONS", "CliSpec", "cli_args", "fit_command",
           "flatten", "is_cli_config", "parse_cli"]

#: ``cli:`` when the config leaves it out: Lightning's own CLI, every class by ``class_path``.
DEFAULT_CLI = "lightning.pytorch.cli:LightningCLI"
#: The CLI sections a tune config may give inline (layered after its ``config:`` files).
SECTIONS = ("model", "data", "trainer", "optimizer", "lr_scheduler")
#: Trainer arguments the launcher sets for every trial, and why; a project's config files may
#: set them (the launcher replaces them and says so once), a tune config may not.
OWNED_TRAINER: dict[str, str] = {
    "accelerator": "each trial runs on its slot's devices (set devices.accelerator)",
    "devices": "each trial runs on its slot's devices (set devices.per_trial)",
    "strategy": "the launcher picks ddp for devices.per_trial > 1, else auto",
    "num_nodes": "a trial runs on one machine (several machines share a study instead)",
    "default_root_dir": "each trial writes into its own folder run_dir/<study>/trial_NNNNN",
    "enable_checkpointing": "the launcher keeps each trial's best and resume checkpoints",
    "max_steps": "the pruner decides how long a trial trains, in epochs (pruner.max_resource)",
    "max_time": "the study's budget is stop.max_wallclock_time",
    "min_epochs": "the pruner decides how long a trial trains, in epochs (pruner.max_resource)",
    "fast_dev_run": "a trial must train its epochs (run the project's own fit to try it)",
    "enable_progress_bar": "workers write logs, not progress bars",
    "barebones": "the launcher logs each trial's epochs and keeps its checkpoints (barebones "
                 "turns both off)",
}
#: What the launcher sets the owned arguments that do not depend on the slot to: a project config
#: that sets one of them to the same value is not told it is replaced.
FIXED_TRAINER: dict[str, Any] = {
    "enable_checkpointing": True, "max_steps": -1, "max_time": None, "min_epochs": None,
    "fast_dev_run": False, "enable_progress_bar": False, "barebones": False,
}


@dataclass(frozen=True)
class CliSpec:
    """How trials are built through a LightningCLI.

    ``entry``: ``"module:name"`` of a function taking ``args`` that builds the CLI, or of a
    LightningCLI subclass; ``files``: the ``fit --config`` files, in order; ``sections``: the
    config's inline ``model``/``data``/``trainer``/``optimizer``/``lr_scheduler`` sections
    (``trainer.logger: tensorboard | csv`` is the launcher's own and not among them).
    """

    entry: str = DEFAULT_CLI
    files: tuple[str, ...] = ()
    sections: dict[str, Any] = field(default_factory=dict)


def is_cli_config(raw: Mapping[str, Any]) -> bool:
    """Whether a config mapping builds its trials through a LightningCLI (see the module).

    Example::

        >>> is_cli_config({"model": {"name": "lenet"}}), is_cli_config({"config": "c.yaml"})
        (False, True)
        >>> is_cli_config({"model": {"class_path": "lightning_hpo.builtin.models.LeNet"}})
        True
    """
    if "cli" in raw or "config" in raw:
        return True
    return any(isinstance(raw.get(key), Mapping) and "class_path" in raw[key]
               for key in ("model", "data"))


def fit_command(entry: str, search: Sequence[str] | None = None, cwd: Path | None = None,
                subcommand: str = "fit") -> str:
    """The command that runs the project of ``entry`` (``"module:name"``) as its own script, for
    the line that says how to retrain a trial: ``python main.py fit`` where ``main.py`` is in
    ``cwd``, ``python PATH/main.py fit`` where the module was found elsewhere on ``search`` (the
    launcher's ``sys.path``, the project on ``PYTHONPATH``), ``python -m pkg.main fit`` for a
    module in a package (a file in a package is not a script), and ``your CLI's fit`` for
    Lightning's own ``LightningCLI`` or a module not found. It finds the file without importing
    the project (which would import torch).

    Example::

        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "main.py").write_text("")
        >>> fit_command("main:cli_main", [str(folder)], cwd=folder)
        'python main.py fit'
        >>> fit_command("main:cli_main", [str(folder)], cwd=folder.parent) == (
        ...     f"python {folder.name}/main.py fit")
        True
        >>> fit_command("proj.train:cli", [str(folder)], cwd=folder)
        'python -m proj.train fit'
        >>> fit_command(DEFAULT_CLI)
        "your CLI's fit"
        >>> fit_command("proj.train:cli", [str(folder)], cwd=folder, subcommand="")
        'python -m proj.train'
        >>> import shutil; shutil.rmtree(folder)
    """
    module = entry.partition(":")[0]
    after = f" {subcommand}" if subcommand else ""
    if entry == DEFAULT_CLI:
        return "your CLI's fit"
    if "." in module:
        return f"python -m {module}{after}"
    cwd = Path.cwd() if cwd is None else cwd
    places = [str(cwd) if place in ("", ".") else place
              for place in (sys.path if search is None else search)]
    try:
        spec = PathFinder.find_spec(module, places)
    except (ImportError, OSError, ValueError):
        spec = None
    origin = getattr(spec, "origin", None)
    if not isinstance(origin, str) or not origin.endswith(".py"):
        return (f"python {module}.py{after}" if (cwd / f"{module}.py").is_file()
                else "your CLI's fit")
    script = Path(origin)
    try:
        shown = os.path.relpath(script, cwd)
    except ValueError:  # another drive (Windows)
        shown = str(script)
    if shown.startswith(".."):
        shown = str(script)
    return f"python {shlex.quote(shown)}{after}"


def _entry(value: Any) -> str:
    if value is None:
        return DEFAULT_CLI
    if isinstance(value, str) and value.partition(":")[0].endswith(".py"):
        module = value.partition(":")[0].removesuffix(".py").replace("/", ".")
        raise ConfigError("cli", f"is {value!r}: name the module, not the file "
                          f"({module}:{value.partition(':')[2] or 'cli_main'})")
    module, colon, name = value.partition(":") if isinstance(value, str) else ("", "", "")
    if not (colon and module and name and all(part.isidentifier() for part in
                                              (*module.split("."), *name.split(".")))):
        raise ConfigError("cli", f"is {value!r}, but must be 'module:name': the project's "
                          "function that builds its LightningCLI from `args` (main:cli_main), "
                          "or a LightningCLI subclass")
    return value


def _files(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) and item for item in items):
        raise ConfigError("config", f"is {value!r}, but must be a file path or a list of them "
                          "(the files `python main.py fit --config ...` takes, in that order)")
    return tuple(items)


def parse_cli(raw: Mapping[str, Any]) -> CliSpec:
    """The ``cli``/``config`` fields and inline sections of a config in CLI mode.

    Raises:
        ConfigError: ``cli`` not ``module:name``, ``config`` not a list of paths, a section that
            is not a mapping, ``model.name`` (a registry name; give ``class_path``), or a
            Trainer argument the launcher owns (:data:`OWNED_TRAINER`).
    """
    sections: dict[str, Any] = {}
    for key in SECTIONS:
        value = raw.get(key)
        if value is None:
            continue
        if key in ("optimizer", "lr_scheduler") and isinstance(value, str):
            sections[key] = value  # a class path alone, as on the CLI's command line
            continue
        if not isinstance(value, Mapping):
            raise ConfigError(key, f"must be a mapping (the CLI's {key} section), got {value!r}")
        sections[key] = dict(value)
    for key in ("model", "data"):
        if "name" in sections.get(key, {}):
            raise ConfigError(f"{key}.name", "is a registry name, but this config builds trials "
                              "through a LightningCLI: give "
                              f"{key}: {{class_path: package.module.Class, init_args: {{...}}}}"
                              " (lightning_hpo.builtin.models.LeNet, lightning_hpo.builtin.data."
                              "DigitsDataModule), or set it in the config files")
    trainer = dict(sections.get("trainer", {}))
    for key in trainer:
        if key in OWNED_TRAINER:
            raise ConfigError(f"trainer.{key}", f"is set by the launcher: {OWNED_TRAINER[key]}")
    if trainer.get("logger") in ("tensorboard", "csv"):
        trainer.pop("logger")  # the launcher's own trainer.logger (config.Config.logger)
    trainer.pop("max_epochs", None)  # the launcher's: pruner.max_resource
    if trainer:
        sections["trainer"] = trainer
    else:
        sections.pop("trainer", None)
    return CliSpec(_entry(raw.get("cli")), _files(raw.get("config")), sections)


def format_value(value: Any) -> str:
    """A value as the CLI's command line takes it: strings as they are, others as JSON.

    Example::

        >>> format_value("relu"), format_value(0.001), format_value(True), format_value(None)
        ('relu', '0.001', 'true', 'null')
    """
    return value if isinstance(value, str) else json.dumps(value)


def cli_args(spec: CliSpec, values: Mapping[str, Any]) -> list[str]:
    """The ``fit`` command line of a trial: the files, the inline sections, then ``values``.

    A key that is a prefix of another (``optimizer``, ``optimizer.init_args.lr``) comes first,
    so a class chosen by the search gets its arguments after it.
    """
    args = ["fit"]
    for path in spec.files:
        args += ["--config", path]
    if spec.sections:
        args.append("--config=" + json.dumps(spec.sections))
    for key in sorted(values, key=lambda key: key.count(".")):
        args.append(f"--{key}={format_value(values[key])}")
    return args


def flatten(sections: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"model": {"init_args": {"lr": 1}}}`` -> ``{"model.init_args.lr": 1}`` (lists whole).

    Example::

        >>> flatten({"model": {"class_path": "m.C", "init_args": {"lr": 1}}, "optimizer": "SGD"})
        {'model.class_path': 'm.C', 'model.init_args.lr': 1, 'optimizer': 'SGD'}
    """
    out: dict[str, Any] = {}
    for key, value in sections.items():
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
