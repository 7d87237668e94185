"""`python -m compiler.tools.cli ...` runs the `relayjit` command."""
import sys

from . import main

sys.exit(main())
