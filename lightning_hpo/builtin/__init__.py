"""The built-in models and data: what the quickstart tunes, and what your own can replace.

* :mod:`~lightning_hpo.builtin.models`: :class:`LeNet` and :class:`DropoutMLP` (image
  classifiers that log ``validation_error``), the :data:`MODELS` registry the config's
  ``model.name`` reads;
* :mod:`~lightning_hpo.builtin.data`: :class:`DigitsDataModule` (scikit-learn's digits, offline)
  and :class:`FashionMNISTDataModule`, the :data:`DATAMODULES` registry of ``data.name``;
* :mod:`~lightning_hpo.builtin.tensor_data`: :class:`TensorDataModule`, data prepared once per
  process and kept on the trial's device;
* ``_cuda_graph`` and ``_memory_format``: the built-in models' captured training step on a GPU
  and their channels-last layout.

Names are imported on first use, so ``import lightning_hpo.builtin`` does not import torch.

Example::

    >>> from lightning_hpo.builtin import MODELS, DATAMODULES
    >>> sorted(MODELS), sorted(DATAMODULES)
    (['dropout_mlp', 'lenet'], ['digits', 'fashion_mnist'])
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from lightning_hpo._lazy import lazy_exports

_EXPORTS = {
    "MODELS": "lightning_hpo.builtin.models",
    "DropoutMLP": "lightning_hpo.builtin.models",
    "ImageClassifier": "lightning_hpo.builtin.models",
    "LeNet": "lightning_hpo.builtin.models",
    "build_model": "lightning_hpo.builtin.models",
    "model_class": "lightning_hpo.builtin.models",
    "model_hyperparameters": "lightning_hpo.builtin.models",
    "DATAMODULES": "lightning_hpo.builtin.data",
    "DigitsDataModule": "lightning_hpo.builtin.data",
    "FashionMNISTDataModule": "lightning_hpo.builtin.data",
    "build_datamodule": "lightning_hpo.builtin.data",
    "datamodule_class": "lightning_hpo.builtin.data",
    "datamodule_hyperparameters": "lightning_hpo.builtin.data",
    "TensorBatches": "lightning_hpo.builtin.tensor_data",
    "TensorDataModule": "lightning_hpo.builtin.tensor_data",
    "clear_data_cache": "lightning_hpo.builtin.tensor_data",
}

__all__ = [
    "DATAMODULES",
    "DigitsDataModule",
    "DropoutMLP",
    "FashionMNISTDataModule",
    "ImageClassifier",
    "LeNet",
    "MODELS",
    "TensorBatches",
    "TensorDataModule",
    "build_datamodule",
    "build_model",
    "clear_data_cache",
    "datamodule_class",
    "datamodule_hyperparameters",
    "model_class",
    "model_hyperparameters",
]

if TYPE_CHECKING:
    from lightning_hpo.builtin.data import (
        DATAMODULES,
        DigitsDataModule,
        FashionMNISTDataModule,
        build_datamodule,
        datamodule_class,
        datamodule_hyperparameters,
    )
    from lightning_hpo.builtin.models import (
        MODELS,
        DropoutMLP,
        ImageClassifier,
        LeNet,
        build_model,
        model_class,
        model_hyperparameters,
    )
    from lightning_hpo.builtin.tensor_data import TensorBatches, TensorDataModule, clear_data_cache

__getattr__, __dir__ = lazy_exports(sys.modules[__name__], _EXPORTS, __all__)
