"""The batching log handler (RUN-706, CORE-228): order, batching, immediate warnings, flush at exit, fork."""

from __future__ import annotations

import io
import logging
import os
import threading

import pytest

from tests.support import wait_for
from wurk_django.server.logwriter import BatchingStreamHandler, flush_all


class CountingStream(io.StringIO):
    """A stream that counts writes and flushes, so batching is visible."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.flushes = 0

    def write(self, s: str) -> int:
        self.writes += 1
        return super().write(s)

    def flush(self) -> None:
        self.flushes += 1


@pytest.fixture
def make_logger(request):
    """A private logger with one BatchingStreamHandler; the handler is closed at teardown."""
    made: list[tuple[logging.Logger, BatchingStreamHandler]] = []

    def make(stream, interval: float) -> tuple[logging.Logger, BatchingStreamHandler]:
        log = logging.getLogger(f"tests.logwriter.{request.node.name}.{len(made)}")
        log.setLevel(logging.DEBUG)
        log.propagate = False
        handler = BatchingStreamHandler(stream, interval=interval)
        handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
        log.addHandler(handler)
        made.append((log, handler))
        return log, handler

    yield make
    for log, handler in made:
        log.removeHandler(handler)
        handler.close()


def test_info_lines_wait_for_one_batched_write(make_logger):
    stream = CountingStream()
    log, handler = make_logger(stream, interval=0.05)
    for i in range(200):
        log.info("line %d", i)
    wait_for(lambda: stream.getvalue().count("\n") == 200, message="the batch")
    assert stream.getvalue().splitlines() == [f"INFO line {i}" for i in range(200)]
    # 200 lines logged in a tight loop reach the stream in a few writes, not 200.
    assert stream.writes < 20


def test_warning_is_written_at_once_after_what_was_queued(make_logger):
    stream = CountingStream()
    log, handler = make_logger(stream, interval=60)  # the writer would not run during this test
    log.info("first")
    log.debug("second")
    assert stream.getvalue() == ""
    log.warning("third")
    assert stream.getvalue().splitlines() == ["INFO first", "DEBUG second", "WARNING third"]


def test_exception_traceback_is_written_at_once(make_logger):
    stream = CountingStream()
    log, handler = make_logger(stream, interval=60)
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("it failed")
    text = stream.getvalue()
    assert text.startswith("ERROR it failed\nTraceback")
    assert "ValueError: boom" in text


def test_flush_and_close_write_the_queue(make_logger):
    stream = CountingStream()
    log, handler = make_logger(stream, interval=60)
    log.info("a")
    handler.flush()
    assert stream.getvalue() == "INFO a\n"
    log.info("b")
    flush_all()  # what a hard stop calls before os._exit
    assert stream.getvalue() == "INFO a\nINFO b\n"
    log.info("c")
    handler.close()  # logging.shutdown() at exit closes every handler
    assert stream.getvalue().endswith("INFO c\n")


def test_interval_zero_writes_every_line(make_logger):
    stream = CountingStream()
    log, handler = make_logger(stream, interval=0)
    log.info("one")
    assert stream.getvalue() == "INFO one\n"
    log.info("two")
    assert stream.writes == 2


def test_negative_interval_is_refused():
    with pytest.raises(ValueError, match="-1"):
        BatchingStreamHandler(io.StringIO(), interval=-1)


def test_threads_lose_no_line_and_keep_their_own_order(make_logger):
    stream = CountingStream()
    log, handler = make_logger(stream, interval=0.01)

    def produce(name: str) -> None:
        for i in range(500):
            log.info("%s %d", name, i)

    threads = [threading.Thread(target=produce, args=(f"t{n}",)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    handler.flush()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 8 * 500
    for n in range(8):
        mine = [int(line.split()[2]) for line in lines if line.split()[1] == f"t{n}"]
        assert mine == list(range(500))


def test_a_broken_stream_is_reported_and_does_not_raise(make_logger, capsys):
    class Broken(io.StringIO):
        def write(self, s: str) -> int:
            raise BrokenPipeError("reader went away")

    log, handler = make_logger(Broken(), interval=60)
    log.info("lost")
    log.error("also lost")  # written at once: the failure surfaces here, in this thread
    assert "2 line(s) lost" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_forked_child_does_not_write_the_parents_queued_lines(make_logger, tmp_path):
    path = tmp_path / "out.log"
    with open(path, "w") as stream:
        log, handler = make_logger(stream, interval=60)
        log.info("from the parent")
        pid = os.fork()
        if pid == 0:  # the child: log its own line and flush, as a swarm child does before os._exit
            try:
                log.info("from the child")
                handler.flush()
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        handler.close()
    lines = path.read_text().splitlines()
    assert sorted(lines) == ["INFO from the child", "INFO from the parent"]


def test_usable_from_django_logging_dictconfig(tmp_path):
    import logging.config

    path = tmp_path / "dict.log"
    with open(path, "w") as stream:
        logging.config.dictConfig({
            "version": 1,
            "disable_existing_loggers": False,
            "handlers": {"wurk": {"class": "wurk_django.server.logwriter.BatchingStreamHandler",
                                  "stream": stream, "interval": 60}},
            "loggers": {"tests.logwriter.dictconfig": {"handlers": ["wurk"], "level": "INFO", "propagate": False}},
        })
        log = logging.getLogger("tests.logwriter.dictconfig")
        [handler] = log.handlers
        try:
            assert isinstance(handler, BatchingStreamHandler) and handler.interval == 60
            log.info("queued")
            assert path.read_text() == ""
            handler.flush()
            assert path.read_text() == "queued\n"
        finally:
            log.removeHandler(handler)
            handler.close()


def test_stop_writers_leaves_no_thread_and_writes_the_queue(make_logger):
    """A swarm supervisor forks only as the sole thread (RUN-810): the writer must be stoppable."""
    from wurk_django.server.logwriter import stop_writers

    stream = CountingStream()
    log, handler = make_logger(stream, interval=60)
    before = set(threading.enumerate())
    log.info("before the fork")
    [writer] = [t for t in set(threading.enumerate()) - before if t.name == "wurk-log-writer"]
    stop_writers()
    assert not writer.is_alive()
    assert stream.getvalue() == "INFO before the fork\n"
    log.info("after the fork")  # the next line starts a writer again
    [again] = [t for t in set(threading.enumerate()) - before if t.name == "wurk-log-writer"]
    assert again is not writer and again.is_alive()
    handler.flush()
    assert stream.getvalue().endswith("INFO after the fork\n")
