"""Slot planning and the division of a machine's cores (pure functions)."""

from __future__ import annotations

import pytest

from lightning_hpo.launch.devices import (
    plan_slots,
    split_cores,
    threads_per_process,
    visible_gpus,
)


@pytest.mark.parametrize("share", range(1, 17))
@pytest.mark.parametrize("asked", range(0, 10))
def test_a_slot_never_runs_more_threads_than_its_cores(share: int, asked: int) -> None:
    threads, workers = split_cores(share, asked)
    assert threads >= 1 and 0 <= workers <= asked
    assert threads + workers == max(share, 1 + workers)  # all its cores, never more than 1 extra
    assert threads + workers <= share or (share == 1 and workers == 0)
    if asked < share:  # a request that fits is granted, torch takes the rest
        assert (threads, workers) == (share - asked, asked)


@pytest.mark.parametrize("trials_per_device", [1, 2, 4, 8])
def test_trials_sharing_one_gpu_share_the_cores(trials_per_device: int) -> None:
    slots = plan_slots(1, per_trial=1, trials_per_device=trials_per_device)
    share = threads_per_process(16, len(slots))
    assert share * len(slots) <= 16
    assert sum(sum(split_cores(share, 3)) for _ in slots) <= 16


@pytest.mark.parametrize(
    ("devices", "parent", "expected"),
    [
        pytest.param([0], None, "0", id="all-visible"),
        pytest.param([1, 2], "", "1,2", id="empty-means-all"),
        pytest.param([0], "3", "3", id="launcher-given-gpu-3"),
        pytest.param([1, 2], "4, 6,7", "6,7", id="mapped-through-the-list"),
        pytest.param([0], "GPU-5f3a", "GPU-5f3a", id="uuids"),
    ],
)
def test_a_worker_sees_the_launchers_gpus_not_the_drivers(
    devices: list[int], parent: str | None, expected: str
) -> None:
    assert visible_gpus(devices, parent) == expected
