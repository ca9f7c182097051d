"""Slot planning and the division of a machine's cores (pure functions); the ``devices``
section; the GPU probe that keeps torch out of the launcher where no GPU can be."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.config import devices
from lightning_hpo.launch.config.devices import (
    WORKER_MEMORY,
    DevicesSpec,
    cuda_possible,
    machine_memory,
    parse_devices,
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


# -- the devices section and the cheap GPU probe ----------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param({}, DevicesSpec(), id="defaults"),
        pytest.param({"accelerator": "cpu", "count": 2}, DevicesSpec(1, 1, "cpu", 2), id="cpu-2"),
        pytest.param({"per_trial": 2}, DevicesSpec(2, 1, "auto", None), id="ddp"),
        pytest.param({"trials_per_device": 4}, DevicesSpec(1, 4, "auto", None), id="sharing"),
    ],
)
def test_the_devices_section_is_parsed(raw: dict[str, object], expected: DevicesSpec) -> None:
    assert parse_devices(raw) == expected


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        pytest.param([], "devices", id="not-a-mapping"),
        pytest.param({"gpus": 1}, "devices.gpus", id="unknown-key"),
        pytest.param({"per_trial": 0}, "devices.per_trial", id="zero-per-trial"),
        pytest.param({"accelerator": "tpu"}, "devices.accelerator", id="unknown-accelerator"),
        pytest.param({"count": True}, "devices.count", id="bool-count"),
        pytest.param({"per_trial": 2, "trials_per_device": 2}, "devices.trials_per_device",
                     id="ddp-and-sharing"),
    ],
)
def test_a_bad_devices_section_names_its_field(raw: object, field: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_devices(raw)
    assert error.value.field == field


@pytest.mark.parametrize(
    ("platform", "present", "possible"),
    [
        pytest.param("linux", set(), False, id="linux-no-driver"),
        pytest.param("linux", {"/proc/driver/nvidia/gpus"}, True, id="nvidia-driver"),
        pytest.param("linux", {"/dev/dxg"}, True, id="wsl"),
        pytest.param("linux", {"/dev/kfd"}, True, id="rocm"),
        pytest.param("darwin", set(), True, id="not-linux-only-torch-knows"),
    ],
)
def test_cuda_is_possible_only_where_a_gpu_driver_may_be(
    monkeypatch: pytest.MonkeyPatch, platform: str, present: set[str], possible: bool
) -> None:
    monkeypatch.setattr(devices.sys, "platform", platform)
    monkeypatch.setattr(devices.os.path, "exists", lambda path: path in present)
    assert cuda_possible() is possible


def test_auto_on_a_machine_without_a_gpu_driver_never_imports_torch() -> None:
    """``accelerator: auto`` where no GPU can exist: the CPU cores, counted without torch."""
    script = (
        "import sys\n"
        "from lightning_hpo.launch.config.devices import cuda_possible, detect_devices\n"
        "kind, n = detect_devices('auto')\n"
        "print(cuda_possible(), kind, n > 0, 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    possible, kind, counted, imported = done.stdout.split()
    if possible == "True":
        pytest.skip("this machine may have a GPU: torch must count them")
    assert (kind, counted, imported) == ("cpu", "True", "False")


@pytest.mark.parametrize(
    ("physical", "visible", "expected"),
    [
        pytest.param(2, None, 2, id="all-gpus"),
        pytest.param(0, None, 0, id="driver-without-gpus"),
        pytest.param(4, "2,3", 2, id="two-of-four"),
        pytest.param(2, "1,0", 2, id="reordered"),
        pytest.param(2, "", 0, id="empty-hides-all"),
        pytest.param(2, "-1", 0, id="minus-one-hides-all"),
        pytest.param(2, "1,-1,0", 1, id="read-up-to-the-first-invalid"),
        pytest.param(2, "0,0", 1, id="a-repeat-ends-the-list"),
        pytest.param(2, "0,5", 1, id="out-of-range-ends-the-list"),
        pytest.param(2, " 1 , 0 ", 2, id="spaces"),
        pytest.param(2, "GPU-8f2c1d", None, id="uuid-only-cuda-knows"),
        pytest.param(2, "MIG-1/2/3", None, id="mig-only-cuda-knows"),
    ],
)
def test_gpus_are_counted_as_cuda_counts_them(
    tmp_path: Path, physical: int, visible: str | None, expected: int | None
) -> None:
    for bus in range(physical):
        (tmp_path / f"0000:{bus:02x}:00.0").mkdir()
    environ = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    assert devices.gpus_without_torch(environ, str(tmp_path)) == expected


def test_no_driver_folder_means_no_gpu_unless_the_driver_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = str(tmp_path / "nvidia" / "gpus")
    monkeypatch.setattr(devices.os.path, "exists", lambda path: False)
    assert devices.gpus_without_torch({}, missing) == 0
    monkeypatch.setattr(devices.os.path, "exists", lambda path: path == "/dev/nvidiactl")
    assert devices.gpus_without_torch({}, missing) is None
    monkeypatch.setattr(devices.os.path, "exists", lambda path: path == "/dev/dxg")
    assert devices.gpus_without_torch({}, missing) is None  # WSL: only CUDA can count


# -- the slots' processes must fit in the machine's memory -------------------------------------


@pytest.mark.parametrize(("n_devices", "per_trial", "sharing"),
                         [(2, 1, 1), (2, 1, 8), (8, 2, 1), (8, 4, 1), (3, 2, 1), (16, 1, 3)])
def test_a_plan_fits_exactly_at_the_limit_and_not_one_process_beyond(
    n_devices: int, per_trial: int, sharing: int,
) -> None:
    processes = (n_devices // per_trial) * per_trial * sharing
    exact = processes * WORKER_MEMORY
    assert len(plan_slots(n_devices, per_trial, sharing, memory=exact)) == (
        n_devices // per_trial * sharing)
    with pytest.raises(ConfigError) as info:
        plan_slots(n_devices, per_trial, sharing, memory=exact - 1)
    field = "devices.trials_per_device" if sharing > 1 else "devices.count"
    assert info.value.field == field
    assert f"{processes} worker processes" in info.value.message


def test_the_refusal_names_the_most_that_fit() -> None:
    with pytest.raises(ConfigError) as info:
        plan_slots(4, 1, 1000, memory=100 * WORKER_MEMORY)
    assert str(info.value).endswith("at most 25 here")
    assert len(plan_slots(4, 1, 25, memory=100 * WORKER_MEMORY)) == 100


def test_without_a_memory_figure_nothing_is_checked() -> None:
    assert len(plan_slots(2, 1, 1000)) == 2000


def test_this_machine_s_memory_is_known_on_linux() -> None:
    memory = machine_memory()
    assert memory is None or memory > WORKER_MEMORY
    if sys.platform == "linux":
        assert memory is not None
