from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # set_language: a form may switch the admin's language (LocaleMiddleware follows the choice).
    path("i18n/", include("django.conf.urls.i18n")),
]
