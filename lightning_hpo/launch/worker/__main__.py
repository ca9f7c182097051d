"""``python -m lightning_hpo.launch.worker``: a worker, started by the supervisor, one per slot.

Its imports (torch, Lightning, Optuna, the trial loop) run with the garbage collector paused
(:func:`~lightning_hpo.launch.worker._collector.imports_without_collection`); the DDP ranks
Lightning starts from it run this same module. It exits without the interpreter's teardown of
torch (:func:`~lightning_hpo.launch.processes.exits.fast_exit`): the launcher waits for this exit.
"""

from lightning_hpo.launch.processes.exits import fast_exit
from lightning_hpo.launch.worker._collector import imports_without_collection

with imports_without_collection(True):
    from lightning_hpo.launch.worker.loop import main

fast_exit(main())
