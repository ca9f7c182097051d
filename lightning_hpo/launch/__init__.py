"""The launcher: ``python -m lightning_hpo.launch CONFIG.yaml``.

Modules, one idea each: ``devices`` (slot planning, pure), ``protocol`` (what supervisor and
workers share), ``study`` (queue, claim and end trials in the storage), ``worker`` (the
long-lived trial loop, imports torch), ``supervisor`` (spawn, watch, restart, stop; no torch),
``status`` (live table and summary), ``__main__`` (the CLI).
"""
