"""``python -m chunk_adapter`` is the ``chunk-adapter`` command."""

from .cli import main

raise SystemExit(main())
