"""Imported at a worker's startup (tests.server.settings_ops, ``WURK_TEST_PROBE_MODULE``):
the process never joins the revoke channel, as one whose subscription is down, so it
hears revokes only through its heartbeat."""

from wurk_django.server.stopping import revoke_channel

revoke_channel.RevokeChannel.start = lambda self: None
