"""What a trial's model and data module are built with (``launch.worker._constructor_kwargs``):
the config's fixed arguments, the trial's hyperparameters, and what the launcher gives a built-in
model where the config says nothing (``changes.LAUNCHER_MODEL_ARGS``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from helpers.support import config_file

from lightning_hpo.builtin.models import build_model
from lightning_hpo.launch.config import parse_config
from lightning_hpo.launch.config.changes import LAUNCHER_MODEL_ARGS
from lightning_hpo.launch.processes.protocol import WorkerSpec
from lightning_hpo.launch.worker.training import _constructor_kwargs

SPEC = WorkerSpec(slot=0, devices=(0,), kind="cpu", threads=2, launcher_pid=os.getppid(),
                  events_fd=-1, deadline=None)


def _kwargs(tmp_path: Path, model: dict) -> tuple[dict, dict]:
    cfg = parse_config(yaml.safe_load(config_file(tmp_path, model=model).read_text()))
    return _constructor_kwargs(cfg, SPEC, {"lr": 0.05, "batch_size": 64})


@pytest.mark.parametrize("name", ["lenet", "dropout_mlp"])
def test_a_built_in_model_replays_its_steps_from_a_cuda_graph_where_one_applies(
        tmp_path: Path, name: str) -> None:
    model_kwargs, data_kwargs = _kwargs(tmp_path, {"name": name})
    assert LAUNCHER_MODEL_ARGS == {"cuda_graphs": "auto", "channels_last": "auto"}
    assert model_kwargs == {"cuda_graphs": "auto", "channels_last": "auto", "lr": 0.05}
    assert data_kwargs == {"batch_size": 64, "num_workers": 0}  # its share of the cores, less 1
    assert build_model(name, **model_kwargs).hparams.cuda_graphs == "auto"
    assert build_model(name, **model_kwargs).hparams.channels_last == "auto"


@pytest.mark.parametrize("written", [False, True])
def test_the_configs_cuda_graphs_wins(tmp_path: Path, written: bool) -> None:
    model_kwargs, _ = _kwargs(tmp_path, {"name": "lenet", "cuda_graphs": written})
    assert model_kwargs["cuda_graphs"] is written


def test_a_model_named_by_its_path_gets_only_what_the_config_gives(tmp_path: Path) -> None:
    """A user's class (its own callbacks or hooks may change it during fit) keeps its own
    default: the launcher adds nothing."""
    model_kwargs, _ = _kwargs(tmp_path, {"name": "lightning_hpo.builtin.models:LeNet"})
    assert model_kwargs == {"lr": 0.05}
    hparams = build_model("lightning_hpo.builtin.models:LeNet", **model_kwargs).hparams
    assert hparams.cuda_graphs is False and hparams.channels_last is False
