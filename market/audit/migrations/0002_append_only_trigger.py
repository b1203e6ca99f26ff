"""The audit table refuses UPDATE and DELETE in the database itself (PostgreSQL); the hash chain still shows a
truncated log as shorter than its recorded head."""

from django.db import migrations

from market.append_only import append_only_trigger


class Migration(migrations.Migration):

    dependencies = [("audit", "0001_initial")]

    operations = [append_only_trigger("audit_auditevent", what="audit events")]
