"""Rule families. Importing this package registers every rule (explicit imports, no entry points)."""

from __future__ import annotations

from gpuplan.rules import (  # noqa: F401  (registration side effect)
    benchmark,
    budget,
    fit,
    form_factor,
    input,
    parallelism,
    right_sizing,
    schema,
    storage,
    verify,
    waivers,
)
