"""``python -m alpha``: the same command line as the ``alpha`` entry point."""

import sys

from alpha.app.cli import main

sys.exit(main())
