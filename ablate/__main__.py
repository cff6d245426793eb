"""``python -m ablate``: the same command line as the ``ablate`` console script.

``-m`` puts the working directory first on ``sys.path`` (unless ``-P``/``PYTHONSAFEPATH``, 3.11+), which the console
script does not: plain ``wandb agent`` runs a sweep file's ``python -m ablate train ...`` in whatever folder it was
started, where a planted ``yaml.py`` would run. Take it off before anything else is imported (``ablate/__init__.py``
imports nothing).
"""

import os
import sys

if sys.path[:1] == [os.getcwd()]:
    del sys.path[0]

from ablate.cli import main  # noqa: E402  (after the working directory left sys.path)

if __name__ == "__main__":
    main()
