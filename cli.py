"""``python cli.py ...`` from a checkout, without installing: the ``ablate`` command line (:mod:`ablate.cli`)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ablate.cli import main  # noqa: E402 - after the checkout is on the path

if __name__ == "__main__":
    main()
