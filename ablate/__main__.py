"""``python -m ablate``: the same command line as the ``ablate`` console script."""

import os
import sys

if sys.version_info < (3, 11) and os.environ.get("PYTHONSAFEPATH") and sys.path[:1] == [os.getcwd()]:
    del sys.path[0]  # Python 3.10 ignores the PYTHONSAFEPATH a trial gets (sweep.local.child_env): -m put it there

from ablate.cli import main  # noqa: E402  (after the working directory left sys.path)

if __name__ == "__main__":
    main()
