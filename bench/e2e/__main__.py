"""``python -m bench.e2e ...``: the end-to-end benchmark's command line (cli.py)."""
import sys

from .cli import main

sys.exit(main())
