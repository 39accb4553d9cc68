"""The planner: one layout search that every rule, the report and ``gpuplan plan`` use.

``space`` says which layouts a model and a GPU allow, ``evaluate`` judges one layout with the estimator
against every constraint, ``search`` finds the cheapest sound layout (lazily, for lint) or builds the
whole table (for ``gpuplan plan`` and reports).
"""
