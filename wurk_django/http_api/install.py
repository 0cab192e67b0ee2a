"""The HTTP API installs nothing into a pushing process, a worker or the admin: it is
reached only through the URLs a project mounts (or ``manage.py wurk_http_api``). Listed in
:data:`wurk_django.features.BUILTIN` with no part so its settings rows join the table."""
