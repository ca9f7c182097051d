"""Your own data, prepared once per launcher worker and kept on the trial's device.

Subclass :class:`lightning_hpo.TensorDataModule` and write two methods: ``data_key()`` (what
identifies the data: every argument that changes it, never the batch size) and
``load_tensors()`` (the training and validation tensors, on the CPU). The launcher's persistent
workers then load the data once and reuse it for every later trial with the same key; on a GPU
the tensors stay on the device and batches are made by indexing there, with no loader
processes. Each trial's study record says which path it took (``user_attrs["data"]``).

This script tunes DropoutMLP's learning rate on a synthetic 10-class problem (scikit-learn's
``make_classification``, 784 features shaped as 28x28 images, so the built-in models fit it) with
4 trials on 1 CPU slot, then prints each trial's data path: the first prepares the tensors, the
others reuse them::

    python examples/own_datamodule.py          # about 8 s on 2 cores

    trial 0: Blobs: tensors on cpu (9.4 MB, prepared in 0.30 s)  validation_error 0.53
    trial 1: Blobs: tensors on cpu (9.4 MB, reused)  validation_error 0.55
    ...

In a config file the same module is ``data: {name: "own_datamodule:Blobs", n_samples: 3000}``
with ``own_datamodule.py`` importable (on ``PYTHONPATH``) where the launcher and its workers run.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Hashable, Sequence
from pathlib import Path

import torch
from torch import Tensor

from lightning_hpo import TensorDataModule


class Blobs(TensorDataModule):
    """A synthetic 10-class problem: ``n_samples`` points in 784 dimensions, as 1x28x28 images,
    80% for training and 20% for validation.

    Args:
        batch_size: examples per batch, ``>= 1``.
        n_samples: examples in all.
        seed: the seed of the data (not of the shuffling, which follows ``seed_everything``).
        on_device: ``"auto"``, ``True`` or ``False`` (see :mod:`lightning_hpo.builtin.tensor_data`).
    """

    def __init__(
        self, batch_size: int = 64, n_samples: int = 3000, seed: int = 0,
        on_device: bool | str = "auto",
    ) -> None:
        super().__init__(batch_size, on_device=on_device)
        self.n_samples, self.seed = n_samples, seed
        self.save_hyperparameters()

    def data_key(self) -> Hashable:
        return ("blobs", self.n_samples, self.seed)

    def load_tensors(self) -> tuple[Sequence[Tensor], Sequence[Tensor]]:
        from sklearn.datasets import make_classification

        x, y = make_classification(
            n_samples=self.n_samples, n_features=784, n_informative=30, n_classes=10,
            n_clusters_per_class=1, random_state=self.seed,
        )
        images = torch.as_tensor(x, dtype=torch.float32).reshape(-1, 1, 28, 28)
        labels = torch.as_tensor(y, dtype=torch.int64)
        cut = int(0.8 * len(labels))
        return (images[:cut], labels[:cut]), (images[cut:], labels[cut:])


def main() -> None:
    import lightning_hpo.launch

    here = str(Path(__file__).resolve().parent)
    # The workers import "own_datamodule:Blobs" too: put this folder on their path.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [here, *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    with tempfile.TemporaryDirectory() as tmp:
        study = lightning_hpo.launch.run({
            "study": "own-data",
            "storage": f"{tmp}/own.journal",
            "run_dir": f"{tmp}/runs",
            "model": {"name": "dropout_mlp"},
            "data": {"name": "own_datamodule:Blobs", "n_samples": 3000},
            "space": {"lr": {"loguniform": [0.01, 0.5]}},
            "sampler": {"name": "random", "seed": 0},
            "pruner": "none",
            "trainer": {"max_epochs": 2},
            "devices": {"accelerator": "cpu", "count": 1},
            "stop": {"n_trials": 4},
        })
        for trial in study.trials:
            print(f"trial {trial.number}: {trial.user_attrs.get('data')}"
                  f"  validation_error {trial.value:.2f}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
