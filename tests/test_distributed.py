"""``lightning_hpo.create_study`` under DDP: several ``optimize`` calls, several studies, errors.

The process tests run ``tests/_ddp_optimize_script.py`` as a real 2-process job (CPU, gloo) on
in-memory, journal and SQLite storage; the error encoding is tested directly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from _support import run_job

from lightning_hpo._ddp_channel import LeaderError, decode_error, encode_error

ROOT = Path(__file__).resolve().parents[1]
_SCRIPT = ROOT / "tests" / "_ddp_optimize_script.py"
_TIMEOUT_S = 300  # a hang is the bug under test: fail it, do not wait forever


class _Custom(Exception):
    def __init__(self, code: int, where: str) -> None:
        super().__init__(f"code {code} at {where}")


def _run_job(kind: str, out_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Run the script; return once *every* rank is gone (rank 1 shares the output pipes)."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "RANK", "MASTER_PORT"}}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    return run_job([sys.executable, str(_SCRIPT), kind, str(out_dir), *extra],
                   cwd=out_dir, env=env, timeout=_TIMEOUT_S)


def _rows(out_dir: Path, rank: int) -> list[dict]:
    path = out_dir / f"rank{rank}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["memory", "journal", "sqlite"])
def test_several_optimize_calls_and_studies_follow_rank_zero(kind: str, tmp_path: Path) -> None:
    """optimize(2), optimize(1), a second study with a caught failure, then an uncaught one.

    On main before the fix, the second ``optimize`` hung: rank 1 replayed trial 0 from its
    environment while rank 0 announced trial 2.
    """
    result = _run_job(kind, tmp_path)
    log = result.stderr[-4000:]
    zero, one = _rows(tmp_path, 0), _rows(tmp_path, 1)
    expected = [("first", 0), ("first", 1), ("first", 2),
                ("second", 0), ("second", 1), ("second", 2)]
    assert [(r["study"], r["trial"]) for r in zero] == expected, log
    assert zero == one, "the ranks trained different trials or hyperparameters"
    assert all(r["layer_width"] == r["params"]["num_hiddens_1"] for r in one)
    assert all(r["epochs"] == 2 for r in zero)
    assert len({r["params"]["num_hiddens_1"] for r in zero}) >= 2  # a shape did change

    studies = json.loads((tmp_path / "studies.json").read_text())
    assert [t["state"] for t in studies["first"]] == ["COMPLETE"] * 3  # exactly 2 + 1 trials
    assert [t["state"] for t in studies["second"]] == ["FAIL", "COMPLETE"]  # caught, went on
    recorded = {(name, t["number"]): t["params"] for name in studies for t in studies[name]}
    for row in zero:
        if (row["study"], row["trial"]) in recorded:
            assert recorded[(row["study"], row["trial"])] == row["params"]

    # The last optimize raised on rank 0 only, outside `catch`: every rank ends with the error.
    assert result.returncode != 0
    for rank in (0, 1):
        assert (tmp_path / f"error{rank}.txt").read_text() == "ValueError: boom in second trial 2"
    assert "[rank1]: ValueError: boom in second trial 2" in result.stderr
    if kind != "memory":
        storage = (f"sqlite:///{tmp_path / 'study.db'}" if kind == "sqlite" else
                   optuna.storages.JournalStorage(
                       optuna.storages.journal.JournalFileBackend(str(tmp_path / "study.journal"))))
        second = optuna.load_study(study_name="second", storage=storage)
        assert [t.state.name for t in second.trials] == ["FAIL", "COMPLETE", "FAIL"]


@pytest.mark.slow
def test_error_inside_fit_on_rank_zero_reaches_every_rank(tmp_path: Path) -> None:
    """Rank 0 raises mid-epoch while rank 1 waits in a gradient all-reduce: no rank hangs."""
    result = _run_job("memory", tmp_path, "--raise-in-fit")
    assert result.returncode != 0
    for rank in (0, 1):
        error = (tmp_path / f"error{rank}.txt").read_text()
        assert error == "ValueError: boom inside fit on rank 0"
    assert [(r["study"], r["trial"]) for r in _rows(tmp_path, 1)] == [("first", 0)]


@pytest.mark.parametrize(
    ("error", "rebuilt"),
    [
        pytest.param(ValueError("boom"), ValueError("boom"), id="builtin"),
        pytest.param(optuna.exceptions.StorageInternalError("db gone"),
                     optuna.exceptions.StorageInternalError("db gone"), id="library-class"),
        pytest.param(KeyError("lr"), KeyError("lr"), id="key-error-repr-text"),
        pytest.param(_Custom(3, "epoch 2"), LeaderError("test_distributed:_Custom: code 3 at "
                                                        "epoch 2"), id="args-do-not-rebuild"),
        pytest.param(ValueError(object()), None, id="args-not-json"),
    ],
)
def test_errors_travel_as_json_and_rebuild_or_fall_back(
    error: BaseException, rebuilt: BaseException | None
) -> None:
    data = json.loads(json.dumps(encode_error(error)))
    result = decode_error(data)
    if rebuilt is None:
        assert isinstance(result, LeaderError)
        assert "builtins:ValueError: <object object" in str(result)
        return
    assert type(result) is type(rebuilt)
    assert str(result) == str(rebuilt)


def test_decode_refuses_what_is_not_an_exception_class() -> None:
    for data in ({"type": "os:system", "args": ["true"], "text": "x"},
                 {"type": "builtins:int", "args": [1], "text": "1"},
                 {"type": "no.such.module:Error", "args": [], "text": "gone"}):
        assert isinstance(decode_error(data), LeaderError), data
