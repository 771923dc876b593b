"""The command line, the top layer: the commands (``commands``), the flags they
share and how an expected error leaves (``options``), ``gitsync blame`` (``blame``), the
``gitsync drift`` table (``report``) and log setup (``logs``).

May import every other layer; nothing imports it. ``main`` is the console script
(``gitsync = "gitsync.cli:main"`` in pyproject.toml).
"""

from gitsync.cli.commands import main as main
