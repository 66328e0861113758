# The injection index leads with the workspace, so that "how many envelopes carried this
# memory, in this workspace" is answered from the index alone (it visited every row's page
# before: ~60 ms for a memory carried 100,000 times, 7 ms now; bench/provenance_bench.py).

from django.db import migrations, models

SQL = """
ALTER TABLE audit_injection DROP CONSTRAINT audit_injection_pkey;
ALTER TABLE audit_injection ADD PRIMARY KEY (workspace_id, memory_id, event_id);
"""
REVERSE = """
ALTER TABLE audit_injection DROP CONSTRAINT audit_injection_pkey;
ALTER TABLE audit_injection ADD PRIMARY KEY (memory_id, event_id);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0010_workspace_settings_archived"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(SQL, REVERSE)],
            state_operations=[
                migrations.AlterField(
                    model_name="injection",
                    name="pk",
                    field=models.CompositePrimaryKey(
                        "workspace_id",
                        "memory_id",
                        "event_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
            ],
        ),
    ]
