# The admin index's entry for the Policies page (issue 47 item 3): a proxy, no table.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('wurk_django', '0003_workflows_page_link'),
    ]

    operations = [
        migrations.CreateModel(
            name='PoliciesPage',
            fields=[
            ],
            options={
                'verbose_name': 'policies',
                'verbose_name_plural': 'policies',
                'proxy': True,
                'default_permissions': (),
                'indexes': [],
                'constraints': [],
            },
            bases=('wurk_django.dashboard',),
        ),
    ]
