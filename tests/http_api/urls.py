"""A project that mounts the HTTP API where the docs say to."""

from django.urls import include, path

urlpatterns = [path("wurk/v1/", include("wurk_django.http_api.urls"))]
