"""The memories' vectors, written: the one statement that stores a batch of them, for the
embedding job (``recall.services.memory_embed``) and the re-embed sweep
(``maintenance.sweeps``).

A template like the filter's (``policy_filter``): ``{table}`` the memory table, named
parameters. Written only where the content is still the one embedded and the row is not
embedded by this model already: an edit made meanwhile has queued its own job, whose vector
an older one must not overwrite.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from recall.engine.read import vector_literal
from recall.models import MemoryRecord

VECTORS_WRITE = """
UPDATE {table} m
SET embedding = v.embedding::vector, embedding_model = %(model)s
FROM unnest(%(ids)s::bigint[], %(contents)s::text[], %(vectors)s::text[])
    AS v(id, content, embedding)
WHERE m.id = v.id AND m.content = v.content AND m.embedding_model IS DISTINCT FROM %(model)s
"""


def memory_vectors_write(
    *, model: str, rows: Sequence[tuple[int, str]], vectors: Sequence[Sequence[float]]
) -> int:
    """Store ``vectors`` (one per ``rows``' (id, content), as ``model`` embedded that
    content); returns how many rows were written."""
    with connection.cursor() as cursor:
        cursor.execute(
            VECTORS_WRITE.format(table=MemoryRecord._meta.db_table),
            {
                "model": model,
                "ids": [pk for pk, _ in rows],
                "contents": [content for _, content in rows],
                "vectors": [vector_literal(vector) for vector in vectors],
            },
        )
        return int(cursor.rowcount)
