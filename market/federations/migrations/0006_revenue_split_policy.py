# The revenue split policy per federation (issue 28): agreement (the split before), value or equal.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('federations', '0005_membership_policy_and_join_requests'),
    ]

    operations = [
        migrations.AddField(
            model_name='federation',
            name='revenue_split',
            field=models.CharField(choices=[('agreement', 'By share of agreeing labels'), ('value', 'By contribution value (L0 models; negative values are paid nothing)'), ('equal', 'Equally among the silos that took part')], default='agreement', help_text="How a sale's revenue is split among the model's silos (docs/market.md); the value split applies to L0 models only, and an L1 or L2 model is split by agreement.", max_length=20),
        ),
    ]
