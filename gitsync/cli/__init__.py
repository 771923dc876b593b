"""The command line, the top layer: the ``gitsync`` group (``app``), a module a command
(``validate``, ``sync``, ``run``, ``diff``, ``drift``, ``blame``), their flags as one typed
value (``flags``), what several commands build from them (``common``), the flags they share
and how an expected error leaves (``options``), the ``gitsync drift`` table (``report``)
and log setup (``logs``).

May import every other layer; nothing imports it. ``main`` is the console script
(``gitsync = "gitsync.cli:main"`` in pyproject.toml).
"""

from gitsync.cli.app import main as main
