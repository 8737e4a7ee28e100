"""`python -m tnmt` is the `tnmt` command."""

import sys

from tnmt.cli import main

sys.exit(main())
