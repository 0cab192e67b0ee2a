"""Fixtures of the topology tests."""

from __future__ import annotations

import pytest

from tests.topologies.cluster_client import cluster_settings


@pytest.fixture
def on_cluster(redis_cluster):
    """The settings pointing at the test cluster's first node; the fixture is a cluster client."""
    with cluster_settings(redis_cluster) as client:
        yield client
