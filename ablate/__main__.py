"""``python -m ablate``: the same command line as the ``ablate`` console script."""

from cli import main

if __name__ == "__main__":
    main()
