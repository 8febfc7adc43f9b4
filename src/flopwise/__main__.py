"""`python -m flopwise` (also what `torchrun -m flopwise` runs)."""

from flopwise.cli.main import main

raise SystemExit(main())
