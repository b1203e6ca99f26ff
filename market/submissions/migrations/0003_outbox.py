
import django.db.models.deletion
from django.db import migrations, models


def queue_stuck_validations(apps, schema_editor):
    """Submissions left pending by an upload during a broker outage get a message to send, so the sweep
    validates them."""
    Submission, SubmissionOutbox = apps.get_model("submissions", "Submission"), apps.get_model("submissions",
                                                                                               "SubmissionOutbox")
    SubmissionOutbox.objects.bulk_create(SubmissionOutbox(submission_id=submission_id) for submission_id in
                                         Submission.objects.filter(status="pending").values_list("id", flat=True))


class Migration(migrations.Migration):

    dependencies = [
        ('submissions', '0002_privacy_report'),
    ]

    operations = [
        migrations.CreateModel(
            name='SubmissionOutbox',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('published_at', models.DateTimeField(blank=True, null=True)),
                ('publish_attempts', models.PositiveIntegerField(default=0)),
                ('last_error', models.TextField(blank=True)),
                ('submission', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='outbox', to='submissions.submission')),
            ],
            options={
                'ordering': ['created_at', 'id'],
                'abstract': False,
                'indexes': [models.Index(fields=['published_at'], name='submissions_outbox_unpublished')],
            },
        ),
        migrations.RunPython(queue_stuck_validations, migrations.RunPython.noop),
    ]
