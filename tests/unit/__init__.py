"""Unit tests, one folder per package of ``lightning_hpo`` (``unit/launch/config/`` tests
``lightning_hpo.launch.config``). Every folder under ``tests/`` but ``tests/`` itself is a
package, so that two test files of one name (``unit/test_cli.py``, ``unit/report/test_cli.py``)
import as two modules under pytest's default (prepend) import mode."""
