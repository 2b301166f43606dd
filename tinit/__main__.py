"""``python -m tinit init ...``: the same as the ``tinit`` console script (``tinit.tools.cli.main``)."""

from tinit.tools.cli import main

raise SystemExit(main())
