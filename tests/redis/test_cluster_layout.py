"""The cluster key layout (issue 46 item 2, stage 1): every multi-key step is one hash
slot, different queues spread over the primaries, and the one-server layout is
Sidekiq's, byte for byte. Checked by arithmetic (redis-py's CRC16) and on a real
cluster of three primaries (``redis_cluster``)."""

from __future__ import annotations

import pytest
from redis.crc import key_slot
from redis.exceptions import RedisClusterException, ResponseError

from wurk_django import keys
from wurk_django.redis import cluster_layout
from wurk_django.redis.cluster_layout import CLUSTER, SIDEKIQ, queue_tag, steps, tag

NAMES = ["default", "mail", "critical", "low", "a}b", "a", "{x}", "%7D", "ünïcode", "with space", "q:1|2"]
QUEUES = [f"queue-{n}" for n in range(24)]


def slots(names: list[str]) -> set[int]:
    return {key_slot(name.encode()) for name in names}


@pytest.mark.parametrize("queue", NAMES)
def test_every_step_is_one_slot_on_a_cluster(queue):
    for step, names in steps(CLUSTER, queue).items():
        assert len(slots(names)) == 1, f"{step}: {names}"


def test_the_one_server_layout_is_sidekiqs():
    layout = cluster_layout.for_cluster(False)
    assert layout is SIDEKIQ and not layout.cluster
    assert (layout.queue("mail"), layout.schedule("mail"), layout.retry("mail"), layout.dead("mail")) \
        == ("queue:mail", "schedule", "retry", "dead")
    assert (layout.queues, layout.processes, layout.leader, layout.stat("processed")) \
        == (keys.QUEUES, keys.PROCESSES, keys.LEADER, "stat:processed")
    assert layout.private_queue("mail", "h", 7, "n", 2) == "queue:mail|h|7|n|2"
    assert layout.process("h:7:n") == "h:7:n" and layout.work("h:7:n") == "h:7:n:work"
    assert layout.unique_lock("mail", "abc") == "unique:abc" and layout.batch("B", "jids") == "b-B-jids"
    assert (layout.started("mail", "h", 7, "n", 1), layout.recovered("mail", "J"), layout.crashes("mail", "J"),
            layout.paced("mail"), layout.held_index("mail")) \
        == ("super_fetch:started:h|7|n|1", "super_fetch:recovered:J", "super_fetch:crashes:J",
            "super_fetch:reaper:paced:mail", "super_fetch:held")
    # Why a cluster needs its own: on it, Sidekiq's promotion would cross slots.
    assert len(slots(steps(SIDEKIQ, "mail")["schedule promoted"])) > 1


def test_a_queue_name_cannot_borrow_another_queues_tag():
    assert queue_tag("a}b") != queue_tag("a") and key_slot(queue_tag("a}b").encode()) != key_slot(b"{q:a}")
    assert queue_tag("%7D") != queue_tag("}")
    assert tag("q", "{x}") == "{q:%7Bx%7D}"
    # The escaped tag is the whole tag: the first } ends it where the name ends.
    for name in NAMES:
        key = CLUSTER.queue(name)
        assert key.index("}") == len(queue_tag(name)) - 1


def test_fleet_wide_keys_each_have_their_own_slot_apart_from_the_queues():
    assert len(slots([CLUSTER.queues, CLUSTER.stat("processed"), CLUSTER.leader])) == 3
    queue_slots = slots([CLUSTER.queue(name) for name in QUEUES])
    assert len(queue_slots) == len(QUEUES)  # 24 queues, 24 slots


def test_queues_spread_over_every_primary_of_a_real_cluster(redis_cluster):
    client = redis_cluster.client()
    try:
        owners = {client.get_node_from_key(CLUSTER.queue(name)).port for name in QUEUES}
        assert owners == set(redis_cluster.primary_ports())
        # The server computes the same slots as the tests' arithmetic.
        for name in NAMES:
            assert client.cluster_keyslot(CLUSTER.queue(name)) == key_slot(CLUSTER.queue(name).encode())
    finally:
        client.close()


TOUCH_ALL = "for _, k in ipairs(KEYS) do redis.call('EXISTS', k) end return #KEYS"


def test_every_step_runs_as_one_script_and_one_transaction_on_a_real_cluster(redis_cluster):
    client = redis_cluster.client()
    try:
        for queue in ("default", "a}b", "critical"):
            for step, names in steps(CLUSTER, queue).items():
                assert client.eval(TOUCH_ALL, len(names), *names) == len(names), step
                # MULTI on the owning node's own client: redis-py 5.3's RedisCluster has no
                # transactions ("transaction is deprecated in cluster mode"); a server refuses
                # a cross-slot MULTI with CROSSSLOT.
                node = client.get_node_from_key(names[0])
                with node.redis_connection.pipeline(transaction=True) as pipe:
                    for name in names:
                        pipe.exists(name)
                    assert pipe.execute() == [0] * len(names), step
        # The same steps in the one-server layout are refused there: the check can fail.
        names = steps(SIDEKIQ, "mail")["schedule promoted"]
        with pytest.raises((RedisClusterException, ResponseError)):
            client.eval(TOUCH_ALL, len(names), *names)
    finally:
        client.close()


def test_a_blocking_reliable_fetch_is_one_slot_but_several_queues_are_not(redis_cluster):
    # The fetch design's primitive: BLMOVE from one queue into its private list (one slot)
    # wakes on a push from another client; one blocking call over two queues cannot exist.
    import threading

    client = redis_cluster.client()
    pusher = redis_cluster.client()
    try:
        queue, private = CLUSTER.queue("mail"), CLUSTER.private_queue("mail", "h", 1, "n")
        timer = threading.Timer(0.2, lambda: pusher.lpush(queue, b"job"))
        timer.start()
        try:
            assert client.blmove(queue, private, 10, "RIGHT", "LEFT") == b"job"
        finally:
            timer.join()
        assert client.lrange(private, 0, -1) == [b"job"] and client.llen(queue) == 0
        two = (CLUSTER.queue("mail"), CLUSTER.queue("low"))
        with pytest.raises(RedisClusterException, match="same key slot"):
            client.execute_command("BLMPOP", 0.1, 2, *two, "RIGHT")
        node = client.get_node_from_key(two[0]).redis_connection  # and the server itself refuses it
        with pytest.raises(ResponseError, match="same slot"):
            node.execute_command("BLMPOP", 0.1, 2, *two, "RIGHT")
    finally:
        client.close()
        pusher.close()


def test_every_limiter_key_is_sidekiqs_on_one_server_and_its_own_slot_on_a_cluster():
    # Issue 46 item 3: the limiters name their keys through the layout of their client.
    one = ("lmtr:L", "lmtr-cs:L", "lmtr-stats:L", "lmtr-b:L:7", "lmtr-w:L", "lmtr-l:L", "lmtr-p:L", "lmtr-list")
    for layout in (SIDEKIQ, CLUSTER):
        names = (layout.limiter_meta("L"), layout.limiter_slots("L"), layout.limiter_stats("L"),
                 layout.limiter_bucket("L", 7), layout.limiter_window("L"), layout.limiter_leaky("L"),
                 layout.limiter_points("L"), layout.limiter_list)
        if layout is SIDEKIQ:
            assert names == one
        else:
            assert len(slots(list(names[:-1]))) == 1 and names[0].startswith("{l:L}")
            assert slots([names[-1]]) == slots([CLUSTER.queues])  # the name list is {wurk}'s


def test_the_layout_of_a_client_is_the_clusters_only_for_a_redis_cluster(redis_cluster):
    import redis

    client = redis_cluster.client()
    try:
        assert cluster_layout.layout_of(client) is CLUSTER
        assert cluster_layout.layout_of(client.pipeline()) is CLUSTER
    finally:
        client.close()
    assert cluster_layout.layout_of(redis.Redis()) is SIDEKIQ and cluster_layout.layout_of(None) is SIDEKIQ
