"""``python -m ablate``: the same command line as the ``ablate`` console script."""

from ablate.cli import main

if __name__ == "__main__":
    main()
