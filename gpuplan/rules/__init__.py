"""Rule families. Importing this package registers every rule (explicit imports, no entry points)."""

from __future__ import annotations

from gpuplan.rules import input, schema  # noqa: F401  (registration side effect)
