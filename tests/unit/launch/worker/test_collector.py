"""The garbage collector paused while a worker imports (``lightning_hpo.launch.worker._collector``):
paused in the block, the block's objects frozen, the collector back as it was, whatever the
block does; and a library import of the worker module leaves the importing process's collector
alone. That a real worker runs its imports so is test_early_start.py's."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator

import pytest

from lightning_hpo.launch.worker._collector import imports_without_collection


@pytest.fixture(autouse=True)
def _collector_as_it_was() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()  # what a test froze goes back to the oldest generation, collected as usual
    if enabled:
        gc.enable()
    else:
        gc.disable()


def test_the_block_runs_paused_and_what_it_made_is_frozen() -> None:
    gc.enable()
    before = gc.get_freeze_count()
    with imports_without_collection():
        assert not gc.isenabled()
        made = [[i] for i in range(5000)]  # lists: objects the collector tracks
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + len(made)


def test_a_collector_off_before_stays_off() -> None:
    gc.disable()
    with imports_without_collection():
        pass
    assert not gc.isenabled() and gc.get_freeze_count() > 0


def test_an_import_that_fails_turns_the_collector_back_on() -> None:
    gc.enable()
    with pytest.raises(ModuleNotFoundError), imports_without_collection():
        import lightning_hpo_no_such_module  # noqa: F401
    assert gc.isenabled()


def test_pause_false_only_runs_the_block() -> None:
    gc.enable()
    gc.unfreeze()
    with imports_without_collection(pause=False):
        assert gc.isenabled()
        made = [[i] for i in range(5000)]
    assert gc.isenabled() and gc.get_freeze_count() == 0 and made


@pytest.mark.slow
def test_importing_the_worker_module_leaves_the_importers_collector_alone() -> None:
    """A library import (a test, a user's script): no pause, nothing frozen."""
    script = ("import gc\nimport lightning_hpo.launch.worker.loop\n"
              "print(gc.isenabled(), gc.get_freeze_count())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True", "0"]
