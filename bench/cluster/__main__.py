"""``python -m bench.cluster run|cleanup ...``: the launcher's command line (launcher.main)."""
import sys

from .cli import main

sys.exit(main())
