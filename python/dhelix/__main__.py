"""python -m dhelix: the same as the `dhelix` console command."""
import sys

from dhelix.cli import main

sys.exit(main())
