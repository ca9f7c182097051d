"""lightning_hpo: fast asynchronous multi-fidelity HPO for PyTorch Lightning, on Optuna.

Three ways in, all on one Optuna study: the :class:`PruningCallback` inside any objective (with
:class:`ASHAPruner` or :class:`HyperbandPruner` on the study, DDP-safe through
:func:`create_study`), the launcher ``python -m lightning_hpo.launch``, and the study database
itself for ``optuna-dashboard``, pandas and ``python -m lightning_hpo.report``. A trial pauses
and resumes (the launcher does it at rungs) with :class:`ResumeCheckpoint` and
:class:`RandomState` in its trainer (on CPU with ``deterministic=True``, resumed training
repeats straight training). Data that fits in memory is prepared once per process and kept on
the trial's device with :class:`TensorDataModule` (the built-in data modules are ones).

Public names are imported lazily (PEP 562), so ``import lightning_hpo.pruners.rungs`` or the
launcher's parent process does not pay for importing torch and Lightning until it needs them.

The distribution is ``lightning-async-hpo`` (``pip install lightning-async-hpo``); the import
name is ``lightning_hpo``. ``lightning-hpo`` on the package index is an unrelated project.

Example::

    >>> import lightning_hpo as hpo
    >>> pruner = hpo.ASHAPruner(min_resource=1, max_resource=27, reduction_factor=3)
    >>> hpo.rung_levels(1, max_resource=27, reduction_factor=3)  # where it may stop a trial
    [1, 3, 9, 27]
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from lightning_hpo._lazy import lazy_exports

#: The package version: the one place it is written (pyproject.toml reads it from here).
__version__ = "0.1.0"

_EXPORTS = {
    "ASHAPruner": "lightning_hpo.pruners",
    "HyperbandPruner": "lightning_hpo.pruners",
    "PruningCallback": "lightning_hpo.callbacks",
    "RandomState": "lightning_hpo.checkpointing",
    "ResumeCheckpoint": "lightning_hpo.checkpointing",
    "ConfigError": "lightning_hpo.errors",
    "DATAMODULES": "lightning_hpo.builtin.data",
    "DigitsDataModule": "lightning_hpo.builtin.data",
    "FashionMNISTDataModule": "lightning_hpo.builtin.data",
    "build_datamodule": "lightning_hpo.builtin.data",
    "TensorBatches": "lightning_hpo.builtin.tensor_data",
    "TensorDataModule": "lightning_hpo.builtin.tensor_data",
    "MODELS": "lightning_hpo.builtin.models",
    "DropoutMLP": "lightning_hpo.builtin.models",
    "LeNet": "lightning_hpo.builtin.models",
    "build_model": "lightning_hpo.builtin.models",
    "DistributedStudy": "lightning_hpo.distributed",
    "create_study": "lightning_hpo.distributed",
    "load_study": "lightning_hpo.distributed",
    "is_follower": "lightning_hpo.distributed",
    "LeaderError": "lightning_hpo.distributed",
    "rung_levels": "lightning_hpo.pruners.rungs",
    "successive_halving_plan": "lightning_hpo.pruners.rungs",
    "hypervolume": "lightning_hpo.pareto",
    "nondominated_fronts": "lightning_hpo.pareto",
    "pareto_order": "lightning_hpo.pareto",
}

__all__ = [
    "ASHAPruner",
    "ConfigError",
    "DATAMODULES",
    "DigitsDataModule",
    "DistributedStudy",
    "DropoutMLP",
    "FashionMNISTDataModule",
    "HyperbandPruner",
    "LeNet",
    "LeaderError",
    "MODELS",
    "PruningCallback",
    "RandomState",
    "ResumeCheckpoint",
    "TensorBatches",
    "TensorDataModule",
    "build_datamodule",
    "build_model",
    "create_study",
    "hypervolume",
    "is_follower",
    "load_study",
    "nondominated_fronts",
    "pareto_order",
    "rung_levels",
    "successive_halving_plan",
]

if TYPE_CHECKING:
    from lightning_hpo.builtin.data import (
        DATAMODULES,
        DigitsDataModule,
        FashionMNISTDataModule,
        build_datamodule,
    )
    from lightning_hpo.builtin.models import MODELS, DropoutMLP, LeNet, build_model
    from lightning_hpo.builtin.tensor_data import TensorBatches, TensorDataModule
    from lightning_hpo.callbacks import PruningCallback
    from lightning_hpo.checkpointing import RandomState, ResumeCheckpoint
    from lightning_hpo.distributed import (
        DistributedStudy,
        LeaderError,
        create_study,
        is_follower,
        load_study,
    )
    from lightning_hpo.errors import ConfigError
    from lightning_hpo.pareto import hypervolume, nondominated_fronts, pareto_order
    from lightning_hpo.pruners import ASHAPruner, HyperbandPruner
    from lightning_hpo.pruners.rungs import rung_levels, successive_halving_plan


__getattr__, __dir__ = lazy_exports(sys.modules[__name__], _EXPORTS, __all__)
