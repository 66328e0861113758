"""Sessions, their turns and the contexts assembled for them. Each table keys its rows on the
workspace and follows it under row-level security, as every workspace-owned table does
(portal 0002).
"""

import django.db.models.deletion
from django.db import migrations, models

# Row-level security: tables with a workspace id of their own.
DIRECT = ("chat_session", "chat_turn", "chat_turncontext")
RULE = (
    "workspace_id = (SELECT portal_single_workspace())"
    " OR current_setting('portal.workspaces', true) = '*'"
    " OR workspace_id = ANY (string_to_array(nullif(current_setting('portal.workspaces', true),"
    " '*'), ',')::bigint[])"
)
SQL = "".join(
    f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;\n"
    f"CREATE POLICY workspace_isolation ON {table} USING ({RULE}) WITH CHECK ({RULE});\n"
    for table in DIRECT
)


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('policies', '0005_tenancy_moves_to_portal'),
        ('portal', '0004_tenancy_foreign_keys'),
        ('recall', '0017_hit_fold'),
    ]

    operations = [
        migrations.CreateModel(
            name='Session',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('environment', models.CharField(max_length=50)),
                ('external_id', models.CharField(blank=True, default='', max_length=200)),
                ('status', models.CharField(choices=[('active', 'Active'), ('ended', 'Ended')], default='active', max_length=10)),
                ('system_prompt', models.TextField(blank=True, default='')),
                ('system_prompt_tokens', models.PositiveIntegerField(default=0)),
                ('tool_schema_tokens', models.PositiveIntegerField(default=0)),
                ('turn_count', models.PositiveIntegerField(default=0)),
                ('last_budget', models.JSONField(blank=True, null=True)),
                ('author', models.CharField(max_length=200)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('ended_at', models.DateTimeField(blank=True, null=True)),
                ('actor', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='sessions', to='recall.actor')),
                ('workload', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='sessions', to='policies.workload')),
                ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='chat_sessions', to='portal.workspace')),
            ],
            options={
                'ordering': ['-id'],
            },
        ),
        migrations.CreateModel(
            name='Turn',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('index', models.PositiveIntegerField()),
                ('role', models.CharField(choices=[('user', 'User'), ('assistant', 'Assistant'), ('tool', 'Tool')], max_length=10)),
                ('content', models.TextField()),
                ('tokens', models.PositiveIntegerField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('session', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='turns', to='chat.session')),
                ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='portal.workspace')),
            ],
            options={
                'ordering': ['session', 'index'],
            },
        ),
        migrations.CreateModel(
            name='TurnContext',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('turn', models.PositiveIntegerField()),
                ('primed', models.BooleanField(default=False)),
                ('prompt', models.JSONField()),
                ('parts', models.JSONField(default=list)),
                ('layout', models.JSONField()),
                ('recall', models.JSONField()),
                ('budget_status', models.JSONField()),
                ('compaction', models.JSONField()),
                ('event_id', models.BigIntegerField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('session', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='contexts', to='chat.session')),
                ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='portal.workspace')),
            ],
            options={
                'ordering': ['session', 'turn'],
            },
        ),
        migrations.AddIndex(
            model_name='session',
            index=models.Index(fields=['workspace', '-id'], name='chat_session_ws_idx'),
        ),
        migrations.AddIndex(
            model_name='session',
            index=models.Index(fields=['actor', 'workload', '-id'], name='chat_session_actor_idx'),
        ),
        migrations.AddIndex(
            model_name='session',
            index=models.Index(condition=models.Q(('status', 'ended')), fields=['workspace', 'ended_at'], name='chat_session_ended_idx'),
        ),
        migrations.AddConstraint(
            model_name='session',
            constraint=models.UniqueConstraint(condition=models.Q(('external_id', ''), _negated=True), fields=('workspace', 'external_id'), name='chat_session_unique_external_id'),
        ),
        migrations.AddConstraint(
            model_name='session',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('ended_at__isnull', True), ('status', 'active')), models.Q(('ended_at__isnull', False), ('status', 'ended')), _connector='OR'), name='chat_session_ended_at_with_status'),
        ),
        migrations.AddConstraint(
            model_name='turn',
            constraint=models.UniqueConstraint(fields=('session', 'index'), name='chat_turn_unique_index'),
        ),
        migrations.AddConstraint(
            model_name='turn',
            constraint=models.CheckConstraint(condition=models.Q(('index__gte', 1)), name='chat_turn_index_positive'),
        ),
        migrations.AddConstraint(
            model_name='turncontext',
            constraint=models.UniqueConstraint(fields=('session', 'turn'), name='chat_context_unique_turn'),
        ),
        migrations.RunSQL(SQL, reverse_sql=migrations.RunSQL.noop),
    ]
