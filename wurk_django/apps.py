from django.apps import AppConfig
from django.core.signals import setting_changed


def _settings_changed(setting: str, **kwargs) -> None:
    if setting == "WURK":
        from .conf import reset_config

        reset_config()


class WurkConfig(AppConfig):
    name = "wurk_django"
    verbose_name = "Wurk"
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        # Only record and connect here: no Redis, no threads, no queries (RUN-840).
        setting_changed.connect(_settings_changed, dispatch_uid="wurk_django.settings_changed")
        from . import checks
        from .embed import boot

        checks.register()
        # Decides whether this process may run embedded workers; starting is left to entry points (DJ-060).
        boot.on_ready()
