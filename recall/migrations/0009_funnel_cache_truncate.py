from django.db import migrations

# TRUNCATE fires no row or statement triggers of the other kinds: empty the funnel cache too.
TRIGGER = """
CREATE FUNCTION recall_memories_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM recall_funnelcache;
    RETURN NULL;
END $$;
CREATE TRIGGER recall_memory_truncated AFTER TRUNCATE ON recall_memoryrecord
    FOR EACH STATEMENT EXECUTE FUNCTION recall_memories_truncated();
"""

DROP = """
DROP TRIGGER recall_memory_truncated ON recall_memoryrecord;
DROP FUNCTION recall_memories_truncated();
"""


class Migration(migrations.Migration):
    dependencies = [("recall", "0008_funnel_cache_inserts")]

    operations = [migrations.RunSQL(TRIGGER, DROP)]
