# Leave room on each heap page so recording a hit (hit_count, last_accessed_at) is a HOT
# update: no new entries in the HNSW and covering indexes on the recall hot path.
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("recall", "0003_workloadlayoutconfigversion")]
    operations = [
        migrations.RunSQL(
            "ALTER TABLE recall_memoryrecord SET (fillfactor = 80)",
            "ALTER TABLE recall_memoryrecord RESET (fillfactor)",
        )
    ]
