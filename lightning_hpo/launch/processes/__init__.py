"""The launcher's processes: the supervisor and the workers it starts, watches and stops.

* :mod:`~lightning_hpo.launch.processes.protocol`: what the supervisor and its workers share
  (the worker's spec, its events, stop orders, signals);
* :mod:`~lightning_hpo.launch.processes.spawn`: a worker started in a session of its own;
* :mod:`~lightning_hpo.launch.processes.early`: workers started from the config file before it
  is validated, so their imports overlap the launcher's own checks;
* :mod:`~lightning_hpo.launch.processes.folders`: the run and storage folders, checked before
  anything is written;
* :mod:`~lightning_hpo.launch.processes.supervisor`: start, watch, restart and stop the
  workers; a dead worker's trial ends FAIL with a reason (no torch in this process);
* ``_worker_logs``: the slots' log folder and its lock.
"""
