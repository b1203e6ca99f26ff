# Each silo's contribution value of a global model (issue 28): workers.valuation, computed by the job's finalize.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0008_job_estimate'),
    ]

    operations = [
        migrations.AddField(
            model_name='globalmodel',
            name='contribution_values',
            field=models.JSONField(blank=True, default=dict, help_text="Each silo's Shapley value of the fusion's own vote or average (workers.valuation.contribution_values): the game, the estimator and per organisation id its values, standard errors, leave-one-out and rank. Empty for kinds without a vote or an average and for older models. Who sees it: market.jobs.visibility."),
        ),
    ]
