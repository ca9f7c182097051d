"""The launcher's config: the file, its grammar and what a later run may change (no torch).

A config is a small YAML file (``configs/quickstart.yaml``)::

    study: quickstart                   # Optuna study name (letters, digits, . _ -)
    storage: runs/quickstart.journal    # journal file path, or any Optuna RDB URL
    model: {name: lenet}                # registry name or "package.module:Class", + fixed args
    data: {name: digits}
    metric: validation_error
    space: {lr: {loguniform: [0.01, 1.0]}, batch_size: {randint: [32, 256]}}
    pruner: {name: asha, min_resource: 1, max_resource: 9, reduction_factor: 3}
    stop: {n_trials: 20, max_wallclock_time: 600}

The modules, from the bottom up: :mod:`~lightning_hpo.launch.config.files` (finding and reading
a config, ``--set`` overrides), :mod:`~lightning_hpo.launch.config.space` (the search-space
grammar), :mod:`~lightning_hpo.launch.config.cli_spec` (a LightningCLI project),
:mod:`~lightning_hpo.launch.config.trainer_values`, :mod:`~lightning_hpo.launch.config.devices`
and :mod:`~lightning_hpo.launch.config.slurm` (the slots), ``_spec`` and ``_parse``
(:class:`Config` and :func:`parse_config`: every problem a
:class:`~lightning_hpo.errors.ConfigError` naming the field),
:mod:`~lightning_hpo.launch.config.changes` (what an existing study's config may change) and
:mod:`~lightning_hpo.launch.config.resolved` (``--print-config``). Checks that build the user's
classes are in :mod:`lightning_hpo.launch.checks`. Relative paths in a config are relative to
the current folder. Example::

    >>> cfg = load_config("quickstart", ["stop.n_trials=5"])
    >>> cfg.study, cfg.stop.n_trials, cfg.storage
    ('quickstart', 5, 'runs/quickstart.journal')

Names are imported on first use: the launcher's early start reads the file through
:mod:`~lightning_hpo.launch.config.files` alone, without Optuna.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from lightning_hpo._lazy import lazy_exports

_EXPORTS = {
    "MAX_SEED": "lightning_hpo.launch.config._parse",
    "TOP_LEVEL": "lightning_hpo.launch.config._parse",
    "default_logger": "lightning_hpo.launch.config._parse",
    "load_config": "lightning_hpo.launch.config._parse",
    "parse_config": "lightning_hpo.launch.config._parse",
    "pause_levels": "lightning_hpo.launch.config._parse",
    "range_end": "lightning_hpo.launch.config._parse",
    "sampler_class": "lightning_hpo.launch.config._parse",
    "sampler_kwargs": "lightning_hpo.launch.config._parse",
    "CHECKPOINT_POLICIES": "lightning_hpo.launch.config._spec",
    "DIRECTIONS": "lightning_hpo.launch.config._spec",
    "LOGGERS": "lightning_hpo.launch.config._spec",
    "MAX_N_TRIALS": "lightning_hpo.launch.config._spec",
    "MODES": "lightning_hpo.launch.config._spec",
    "PRUNERS": "lightning_hpo.launch.config._spec",
    "SAMPLERS": "lightning_hpo.launch.config._spec",
    "TENSORBOARD_INSTALL": "lightning_hpo.launch.config._spec",
    "TRAINER_KEYS": "lightning_hpo.launch.config._spec",
    "CheckpointSpec": "lightning_hpo.launch.config._spec",
    "Config": "lightning_hpo.launch.config._spec",
    "HeartbeatSpec": "lightning_hpo.launch.config._spec",
    "PrunerSpec": "lightning_hpo.launch.config._spec",
    "StopSpec": "lightning_hpo.launch.config._spec",
    "DevicesSpec": "lightning_hpo.launch.config.devices",
    "CONFIG_DIR": "lightning_hpo.launch.config.files",
    "DEFAULT_CONFIG": "lightning_hpo.launch.config.files",
    "apply_overrides": "lightning_hpo.launch.config.files",
    "read_config": "lightning_hpo.launch.config.files",
    "read_yaml": "lightning_hpo.launch.config.files",
    "resolve_config": "lightning_hpo.launch.config.files",
    "shipped_configs": "lightning_hpo.launch.config.files",
    "resolved_config": "lightning_hpo.launch.config.resolved",
    "field_reference": "lightning_hpo.launch.config.reference",
}

__all__ = [
    "CHECKPOINT_POLICIES",
    "CONFIG_DIR",
    "DEFAULT_CONFIG",
    "DIRECTIONS",
    "LOGGERS",
    "MAX_N_TRIALS",
    "MAX_SEED",
    "MODES",
    "PRUNERS",
    "SAMPLERS",
    "TENSORBOARD_INSTALL",
    "TOP_LEVEL",
    "TRAINER_KEYS",
    "CheckpointSpec",
    "Config",
    "DevicesSpec",
    "HeartbeatSpec",
    "PrunerSpec",
    "StopSpec",
    "apply_overrides",
    "default_logger",
    "field_reference",
    "load_config",
    "parse_config",
    "pause_levels",
    "range_end",
    "read_config",
    "read_yaml",
    "resolve_config",
    "resolved_config",
    "sampler_class",
    "sampler_kwargs",
    "shipped_configs",
]

if TYPE_CHECKING:
    from lightning_hpo.launch.config._parse import (
        MAX_SEED,
        TOP_LEVEL,
        default_logger,
        load_config,
        parse_config,
        pause_levels,
        range_end,
        sampler_class,
        sampler_kwargs,
    )
    from lightning_hpo.launch.config._spec import (
        CHECKPOINT_POLICIES,
        DIRECTIONS,
        LOGGERS,
        MAX_N_TRIALS,
        MODES,
        PRUNERS,
        SAMPLERS,
        TENSORBOARD_INSTALL,
        TRAINER_KEYS,
        CheckpointSpec,
        Config,
        HeartbeatSpec,
        PrunerSpec,
        StopSpec,
    )
    from lightning_hpo.launch.config.devices import DevicesSpec
    from lightning_hpo.launch.config.files import (
        CONFIG_DIR,
        DEFAULT_CONFIG,
        apply_overrides,
        read_config,
        read_yaml,
        resolve_config,
        shipped_configs,
    )
    from lightning_hpo.launch.config.reference import field_reference
    from lightning_hpo.launch.config.resolved import resolved_config

__getattr__, __dir__ = lazy_exports(sys.modules[__name__], _EXPORTS, __all__)
