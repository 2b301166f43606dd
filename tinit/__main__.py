"""``python -m tinit init ...``: the same as the ``tinit`` console script (``tinit.cli``)."""

from tinit.cli import main

raise SystemExit(main())
