"""The worker: one slot, many trials, torch imported once.

The supervisor starts ``python -m lightning_hpo.launch.worker`` once per slot.

* :mod:`~lightning_hpo.launch.worker.loop`: the long-lived trial loop: claim a segment, train
  it, tell the study, claim the next; a DDP slot's other ranks follow rank 0 trial by trial;
* :mod:`~lightning_hpo.launch.worker.training`: one segment's Trainer, callbacks and loggers;
* ``_csvlog`` and ``_tblog``: a trial's CSV and TensorBoard logs, continued across pauses;
* ``_once``: each library notice said once in a slot's log; ``_collector``: the imports with
  the garbage collector paused.

Importing this package imports nothing: ``__main__`` imports the loop (torch, Lightning) with
the collector paused, which only the worker's own process does.
"""
