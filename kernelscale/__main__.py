"""``python -m kernelscale``: the ``kernelscale`` command (:func:`kernelscale.cli.main`)."""

import sys

from kernelscale.cli import main

if __name__ == "__main__":
    sys.exit(main())
