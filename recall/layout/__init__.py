"""Chat layout budgeting (seed 000, SPEC section 6): one concept per module.

=============  ==============================================================================
vocabulary     section names, passage terms, the bound on counts, "did you mean" suggestions
config         the ``memory:`` configuration: dataclasses, parsing, the one guarded YAML loader
request        what a caller lays out, and its one pure validation (``check_request``)
budget         the seed's budget accounting
estimate       token estimates and formatting overhead
sections       filtering and filling supporting sections
cascade        the nine-stage pruning cascade
planner        the planning core (phases in its docstring) and its result
monitor        budget severity and the compaction monitor, with seed 000's names
plain          layout values as plain JSON-ready data
services       (Django) stored configurations and the sandbox's preview
=============  ==============================================================================

Everything but ``services`` is plain Python. Import from the module that holds a name
(``from recall.layout.planner import plan_layout``): this face hands nothing on.
"""
