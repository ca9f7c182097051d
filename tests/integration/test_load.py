"""Load on every shareable storage: 4 processes x 100 trials x 10 reports with ASHA.

Zero errors reach the user (no "database is locked"), zero trials are lost, and the rung
records are exactly those the trials earned. The timing table is ``benchmarks/bench_load.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_load.py"

pytestmark = pytest.mark.slow


@pytest.mark.postgres
def test_four_processes_hundred_trials_each(postgres_server: Any) -> None:
    url = postgres_server.new_database("load")
    out = subprocess.run(
        [sys.executable, str(BENCH), "--json", "--processes", "4", "--trials", "100",
         "--postgres", url], capture_output=True, text=True, timeout=1200, check=True,
    ).stdout
    results = {r["storage"]: r for r in map(json.loads, out.strip().splitlines())}
    assert set(results) == {"sqlite", "journal", "postgres"}
    for kind, result in results.items():
        assert result["errors"] == 0, (kind, result["first_error"])
        assert result["trials"] == result["finished"] == 400 and result["lost"] == 0, kind
        assert result["missing_records"] == result["extra_records"] == 0, kind
        assert result["wrong_values"] == 0 and result["records"] >= 400, kind


@pytest.mark.postgres
def test_eight_processes_on_postgres_directly_and_through_the_proxy(postgres_server: Any) -> None:
    """The same load through ``python -m lightning_hpo.proxy``: nothing lost, records exact, and
    the database sees the proxy's one pool (SQLAlchemy's default, 5 + 10 overflow) however
    many workers there are."""
    pytest.importorskip("grpc")
    url = postgres_server.new_database("proxyload")
    out = subprocess.run(
        [sys.executable, str(BENCH), "--json", "--processes", "8", "--trials", "25",
         "--postgres", url, "--proxy", "--only-postgres"],
        capture_output=True, text=True, timeout=1200, check=True,
    ).stdout
    results = {r["storage"]: r for r in map(json.loads, out.strip().splitlines())}
    assert set(results) == {"postgres", "postgres-proxy"}
    for kind, result in results.items():
        assert result["errors"] == 0, (kind, result["first_error"])
        assert result["trials"] == result["finished"] == 200 and result["lost"] == 0, kind
        assert result["missing_records"] == result["extra_records"] == 0, kind
        assert result["wrong_values"] == 0 and result["records"] >= 200, kind
        assert result["peak_connections"] >= 1, kind
    assert results["postgres-proxy"]["peak_connections"] <= 15
