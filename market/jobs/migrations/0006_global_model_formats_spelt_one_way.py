"""Global model files stored as ``xgboost_json`` take the format's one spelling, ``xgboost-json`` (the upload
format's: workers.modelio.base.ArtifactFormat). Download requests with the old name are still answered
(``artifact_format_named``)."""

from django.db import migrations

RENAMED = {"xgboost_json": "xgboost-json"}


def spell_formats_one_way(apps, schema_editor):
    GlobalModelFile = apps.get_model("jobs", "GlobalModelFile")
    for old, new in RENAMED.items():
        GlobalModelFile.objects.filter(format=old).update(format=new)


def spell_formats_the_old_way(apps, schema_editor):
    GlobalModelFile = apps.get_model("jobs", "GlobalModelFile")
    for old, new in RENAMED.items():
        GlobalModelFile.objects.filter(format=new).update(format=old)


class Migration(migrations.Migration):

    dependencies = [("jobs", "0005_query_keys_say_what_they_mean")]

    operations = [migrations.RunPython(spell_formats_one_way, spell_formats_the_old_way)]
