"""The recall engine: the only home of the SQL that decides and ranks what a recall returns.

* ``policy_filter``: the recall filter (the fail-closed rules, the embedded rule and every
  policy axis), written once as templates and compiled for each caller: the hot path's
  statements, the memory browser's "recallable?" column, the floor's impact preview.
* ``funnel_cache``: ``FunnelCache``'s part of the recall statement, its limits, and the
  trigger SQL that keeps it honest (as the migrations installed it).
* ``read``: the hot path's one read statement (funnel, cache, nearest rows) and the ranking
  (exact or HNSW with a fallback); ``recall_read`` writes nothing unless asked to
  ``fill_cache``, when it also stores a large actor's funnel.
* ``vectors``: the one statement that writes the memories' vectors (the embedding job and the
  re-embed sweep).
* ``impact``: what a proposed floor would take out of recall (registered with
  ``policies.impact`` at start-up: policies sits below recall and imports nothing from it).

Nothing here imports the engine's package eagerly: ``recall.models`` reads the filter's
columns from ``policy_filter`` for its covering index.
"""
