"""``python -m hnplan``: the same command line as the ``hnplan`` script."""

from hnplan.cli import main

if __name__ == "__main__":
    main()
