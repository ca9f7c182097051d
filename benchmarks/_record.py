"""One measured figure of a benchmark, and the ``--json`` file that ``run_all.py`` collects.

Every benchmark prints its own table; with ``--json PATH`` it also writes its headline figures
as :class:`Figure` rows, so ``make bench`` can print one table of all of them. A figure is
always a measurement next to a baseline measured in the same run, and their ratio.

Example::

    >>> f = Figure("callback overhead per epoch", "bench_callback.py", "0.231 s/epoch",
    ...            "0.230 s/epoch without", "+0.4%", "< 2%", True)
    >>> f.verdict
    'PASS'
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Figure:
    """One headline figure: what, which script, the measurement, its baseline, the ratio, the
    target and whether it was met (``None``: no target, shown for context)."""

    what: str
    script: str
    measured: str
    baseline: str
    ratio: str
    target: str
    met: bool | None

    @property
    def verdict(self) -> str:
        return {True: "PASS", False: "MISS", None: "-"}[self.met]


def write_figures(path: str | Path | None, figures: list[Figure]) -> None:
    """Write ``figures`` as JSON to ``path`` (nothing when ``path`` is None)."""
    if path is None:
        return
    Path(path).write_text(json.dumps([asdict(f) for f in figures], indent=1))


def read_figures(path: str | Path) -> list[Figure]:
    """The figures a benchmark wrote with :func:`write_figures`."""
    return [Figure(**row) for row in json.loads(Path(path).read_text())]


def machine_line(gpu: bool = False) -> str:
    """CPU count and model (and the GPUs when ``gpu``), Python and package versions, and the
    date: what a record needs."""
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    if gpu:
        import torch

        count = torch.cuda.device_count()
        cpu += f", {count} GPU(s) {torch.cuda.get_device_name(0)}" if count else ", no GPU"
    versions = ", ".join(f"{name} {importlib.metadata.version(name)}"
                         for name in ("torch", "lightning", "optuna"))
    return (f"machine: {len(os.sched_getaffinity(0))} cores, {cpu}; python "
            f"{platform.python_version()}, {versions}; {dt.datetime.now():%Y-%m-%d %H:%M}")
