"""The one page type of the Wagtail test site: searchable text, a link to an image (the
reference index records it) and rich text that may link other pages."""

from django.db import models
from wagtail.fields import RichTextField
from wagtail.models import Page
from wagtail.search import index


class ArticlePage(Page):
    body = RichTextField(blank=True)
    image = models.ForeignKey("wagtailimages.Image", null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")

    search_fields = [*Page.search_fields, index.SearchField("body")]
