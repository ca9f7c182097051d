"""What the tests share and the scripts they run; not tests. ``tests/`` is on ``sys.path`` (the
root ``conftest.py`` puts it there) and on the ``PYTHONPATH`` of the launchers the tests start
(``helpers.support.env``), so they import ``helpers.support`` and configs name
``helpers.launch_models:SlowLeNet``."""
