"""The report package as a whole: it builds on the storage side of the package only (no
launcher, pruner, config or torch), and uses no private name of a public module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from helpers import report_support

# The shared fixtures these tests request (pytest finds fixtures among a module's names).
journal = report_support.journal


REPORT_DIR = Path(__file__).resolve().parents[3] / "lightning_hpo" / "report"
#: What the report may import of the package: the storage side only (the rung records, read
#: through ``lightning_hpo.pruners``' public names, which import no pruner: checked at run time
#: below), and the pure helpers (rung arithmetic, Pareto fronts and hypervolume).
STORAGE_SIDE = {"lightning_hpo._optuna", "lightning_hpo.pruners",
                "lightning_hpo.errors", "lightning_hpo.pareto",
                "lightning_hpo.pruners.rungs", "lightning_hpo.schema", "lightning_hpo.storage",
                "lightning_hpo._lazy",  # names imported on first use (no I/O)
                "lightning_hpo._cli"}  # the CLI tools' argument parser (refusals in one line)


def _package_imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) for every import of lightning_hpo in a file, function bodies included;
    name is None for ``import module``. Relative imports resolve inside the report."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names
                      if alias.name.split(".")[0] == "lightning_hpo"]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = "lightning_hpo.report" + (f".{module}" if module else "")
            if module.split(".")[0] == "lightning_hpo":
                found += [(module, alias.name) for alias in node.names]
    return found


def test_report_imports_only_the_storage_side_and_no_private_name() -> None:
    files = sorted(REPORT_DIR.rglob("*.py"))
    assert {"__init__.py", "__main__.py", "plots/__init__.py", "snapshot.py", "tables.py"} <= {
        f.relative_to(REPORT_DIR).as_posix() for f in files}
    wrong, private = [], []
    for path in files:
        imports = _package_imports(path)
        assert imports, path  # every module of the report builds on the package
        for module, name in imports:
            if module not in STORAGE_SIDE and not module.startswith("lightning_hpo.report"):
                wrong.append(f"{path.name}: {module}")
            public_module = not module.rpartition(".")[2].startswith("_") or module.endswith(
                "__main__")
            if name is not None and name.startswith("_") and public_module:
                private.append(f"{path.name}: {module}.{name}")
    assert not wrong, wrong
    assert not private, private


def test_report_loads_no_launcher_pruner_config_or_torch(journal: str, tmp_path: Path) -> None:
    # the whole CLI path, imports inside functions included, on a study of our pruner
    code = (
        "import sys\n"
        "from lightning_hpo.report.__main__ import main\n"
        f"assert main(['--storage', {journal!r}, '--out', {str(tmp_path / 'rep')!r}]) == 0\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('lightning_hpo', "
        "'torch')))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = set(out.stdout.split("\n")[-2].split())
    assert "lightning_hpo.report.tables" in loaded and "lightning_hpo.pruners._store" in loaded
    assert not {m for m in loaded if m.startswith(("lightning_hpo.launch",
                                                   "lightning_hpo.pruners._asha", "torch"))}, loaded
    assert (tmp_path / "rep" / "rungs.png").exists()
