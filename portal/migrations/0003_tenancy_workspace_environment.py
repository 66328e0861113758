"""Workspace and Environment move from ``policies`` to ``portal`` (tenancy, the ground floor).

State only: the tables keep their names (``policies_workspace``, ``policies_environment``),
their rows, constraints and row-level security; only Django's idea of which app owns the
models changes. The foreign keys of every app are re-pointed in their own migrations, and
``policies.0005`` forgets the old models once none refers to them.
"""

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models

SLUG = django.core.validators.RegexValidator(
    "^[a-z0-9][a-z0-9-]{0,49}$",
    "Use 1-50 lowercase letters, digits or dashes, starting with a letter or digit.",
)


class Migration(migrations.Migration):
    dependencies = [
        ("portal", "0002_row_level_security"),
        ("policies", "0004_workspace_recall_rate"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Workspace",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("slug", models.SlugField(unique=True, validators=[SLUG])),
                        ("name", models.CharField(max_length=200)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("store_queries", models.BooleanField(default=False)),
                        ("recall_rate_per_minute", models.PositiveIntegerField(blank=True, null=True)),
                    ],
                    options={"ordering": ["slug"], "db_table": "policies_workspace"},
                ),
                migrations.CreateModel(
                    name="Environment",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("slug", models.SlugField(validators=[SLUG])),
                        (
                            "workspace",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="environments",
                                to="portal.workspace",
                            ),
                        ),
                    ],
                    options={
                        "ordering": ["slug"],
                        "db_table": "policies_environment",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("workspace", "slug"), name="environment_unique_slug"
                            )
                        ],
                    },
                ),
            ]
        )
    ]
