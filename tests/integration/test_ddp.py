"""DDP on CPU (gloo): two real processes train LeNet and agree on the logged validation error."""

from __future__ import annotations

import json
import sys

import pytest
from helpers.support import HELPERS, REPO, ddp_clean_env, free_port, run_job

_SCRIPT = HELPERS / "ddp_train_script.py"
_REPO_ROOT = REPO
_EPOCHS = 2
_TIMEOUT_S = 240  # two ranks each import torch + Lightning (~7 s) on 2 shared cores


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict]:
    """Run the DDP script once for this module; return each rank's record by global rank."""
    out_dir = tmp_path_factory.mktemp("ddp")
    env = ddp_clean_env(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
        OMP_NUM_THREADS="1",  # two ranks on two cores: no oversubscription
    )
    proc = run_job([sys.executable, str(_SCRIPT), str(out_dir), str(_EPOCHS)],
                   cwd=_REPO_ROOT, env=env, timeout=_TIMEOUT_S)
    assert proc.returncode == 0, f"DDP run failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    records = [json.loads(path.read_text()) for path in sorted(out_dir.glob("rank*.json"))]
    return {record["global_rank"]: record for record in records}


@pytest.mark.slow
def test_both_ranks_finish_every_epoch(ddp_run: dict[int, dict]) -> None:
    assert sorted(ddp_run) == [0, 1]
    for record in ddp_run.values():
        assert record["world_size"] == 2
        assert [epoch["epoch"] for epoch in record["epochs"]] == list(range(1, _EPOCHS + 1))


@pytest.mark.slow
def test_logged_metrics_identical_on_every_rank(ddp_run: dict[int, dict]) -> None:
    rank0, rank1 = ddp_run[0]["epochs"], ddp_run[1]["epochs"]
    for name in ("validation_error", "validation_loss", "train_loss"):
        assert [e[name] for e in rank0] == [e[name] for e in rank1], name
    assert all(0.0 <= e["validation_error"] <= 1.0 for e in rank0)
    # The model changed between epochs: training steps ran and were applied.
    assert rank0[0]["validation_loss"] != rank0[1]["validation_loss"]


@pytest.mark.slow
def test_each_rank_sees_half_the_data(ddp_run: dict[int, dict]) -> None:
    # 1,437 training / 360 validation digits split over 2 ranks, batches of 64 per rank:
    # ceil(719 / 64) = 12 training and ceil(180 / 64) = 3 validation batches (not 23 and 6).
    for record in ddp_run.values():
        assert record["epochs"][0]["num_training_batches"] == 12
        assert record["epochs"][0]["num_val_batches"] == 3
