"""Which registered components a worker builds: the one-server launcher all of them, the
worker on a Redis Cluster those registered with ``cluster=True`` (issue 46 item 3)."""

from __future__ import annotations


def test_only_components_registered_for_a_cluster_are_listed_for_the_cluster_worker():
    # Issue 46 item 3: the cluster worker builds launcher.registered(cluster=True); the
    # one-server launcher builds every registered component, in position order, as before.
    from wurk_django import features
    from wurk_django.server import launcher as launcher_module

    features.install()

    def factory(_launcher):
        return None

    launcher_module.register_component("test-everywhere", factory, position=-2, cluster=True)
    launcher_module.register_component("test-one-server", factory, position=-1)
    try:
        everything = [name for name, _f in launcher_module.registered()]
        on_cluster = [name for name, _f in launcher_module.registered(cluster=True)]
        assert everything[:2] == ["test-everywhere", "test-one-server"]
        assert on_cluster[:4] == ["test-everywhere", "queue_limits", "leader", "periodic"]
        assert "test-one-server" not in on_cluster
        assert set(on_cluster) < set(everything)
        # Registered again without the flag: no longer built on a cluster.
        launcher_module.register_component("test-everywhere", factory, position=-2)
        assert "test-everywhere" not in [name for name, _f in launcher_module.registered(cluster=True)]
    finally:
        launcher_module.unregister_component("test-everywhere")
        launcher_module.unregister_component("test-one-server")
    assert "test-everywhere" not in [name for name, _f in launcher_module.registered()]
