from django.urls import include, path
from wagtail import urls as wagtail_urls
from wagtail.admin import urls as wagtailadmin_urls
from wagtail.api.v2.router import WagtailAPIRouter
from wagtail.api.v2.views import PagesAPIViewSet

api = WagtailAPIRouter("wagtailapi")
api.register_endpoint("pages", PagesAPIViewSet)

urlpatterns = [
    path("cms/", include(wagtailadmin_urls)),
    path("api/v2/", api.urls),
    path("", include(wagtail_urls)),
]
