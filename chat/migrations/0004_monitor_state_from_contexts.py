"""Sessions started before the compaction monitor's state was kept with them: their monitor
is given the turns it would have recorded (one per assembled context) and the budget statuses
of the last ten (the default trend window), as it was rebuilt from them until now."""

from django.db import migrations

WINDOW = 10


def monitor_state_from_contexts(apps, schema_editor):
    Session = apps.get_model("chat", "Session")
    TurnContext = apps.get_model("chat", "TurnContext")
    for session in Session.objects.filter(monitor_turns=0).iterator():
        contexts = TurnContext.objects.filter(session_id=session.pk)
        count = contexts.count()
        if not count:
            continue
        recent = list(contexts.order_by("-turn").values_list("budget_status", flat=True)[:WINDOW])
        session.monitor_turns = count
        session.monitor_recent = list(reversed(recent))
        session.save(update_fields=["monitor_turns", "monitor_recent"])


class Migration(migrations.Migration):

    dependencies = [("chat", "0003_compaction_run_row_security")]

    operations = [
        migrations.RunPython(monitor_state_from_contexts, reverse_code=migrations.RunPython.noop)
    ]
