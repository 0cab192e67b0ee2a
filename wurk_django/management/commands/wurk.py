"""``python manage.py wurk``: run a worker process (CORE-241, DJ-040)."""

from __future__ import annotations

import logging
import os
import sys
import time

import redis as redis_lib
from django.core.management.base import BaseCommand, CommandParser
from django.utils.module_loading import autodiscover_modules

from ... import __version__
from ...conf import Config, capsules, problems
from ...errors import ConfigurationError, RedisClusterError, RedisVersionError
from ...redis import scripts
from ...redis.connection import check_server, get_redis
from ...server import boot_warnings, systemd
from ...server.burst import drained
from ...server.capsules import plan
from ...server.events import StartupError
from ...server.launcher import Launcher, dump_threads
from ...server.logfiles import reopen as reopen_logs
from ...server.logwriter import BatchingStreamHandler, flush_all
from ...server.os_signals import SignalPipe
from ...server.run.joblog import JSONFormatter, PlainFormatter
from ...server.threads import spawn

logger = logging.getLogger("wurk_django.worker")

RELOAD_ENV = "RUN_MAIN"  # Django's autoreloader marks the child it restarts with RUN_MAIN=true
#: The most seconds READY=1 waits for the first beat to list the process.
READY_WAIT = 10.0
#: What ``_connect`` answers for a Redis Cluster node (the worker then boots :mod:`cluster_worker`).
ON_CLUSTER = "cluster"
BANNER = "wurk_django {version}: {identity} pid {pid}, concurrency {concurrency}, queues {queues}, Redis {redis}"


class _Parser(CommandParser):
    """Bad flags exit 1 with a one-line message (the brief: a clear message and exit 1)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"wurk: {message}\n(run `manage.py wurk --help` for the options)\n")
        sys.exit(1)


def _check_fetch(config: Config, running: list) -> None:
    """A fetcher that cannot serve these queues says so here, one line before anything
    starts, rather than as a traceback from inside the launcher (BasicFetch and
    ``QUEUE_LIMITS``: docs/queues.md)."""
    from ...server.fetch.basic import BasicFetch

    fetch_class = config.fetch_class
    if isinstance(fetch_class, type) and issubclass(fetch_class, BasicFetch):
        from ...queue_limits.settings import basic_fetch_refusal

        refusal = basic_fetch_refusal(config.queue_limits, [name for capsule in running
                                                            for name, _ in capsule.queues])
        if refusal:
            raise ConfigurationError(refusal)


class Command(BaseCommand):
    help = "Run a wurk_django worker: fetch jobs from Redis and run them."
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs):  # type: ignore[override]
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        # Django offers no hook for the parser class; _Parser only changes error().
        parser.__class__ = _Parser
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        shown = _settings_shown()
        parser.add_argument("-c", "--concurrency", type=_positive_int,
                            help=f"processor threads (default {shown('CONCURRENCY')})")
        parser.add_argument("-q", "--queue", action="append", dest="queues", metavar="NAME[,WEIGHT]",
                            help="queue to process, repeatable; weights make the order random; only these "
                            f"queues are served (default: {shown('QUEUES', lambda v: ' '.join(f'-q {q}' for q in v))})")
        parser.add_argument("--capsule", action="append", dest="capsules", nargs="+",
                            metavar=("NAME:THREADS", "QUEUE[,WEIGHT]"),
                            help="another thread pool beside the default one (-c/-q): THREADS threads serving "
                            "the queues named after it, e.g. --capsule single:1 single; repeatable; replaces "
                            "WURK['CAPSULES'] (docs/worker.md)")
        parser.add_argument("-t", "--timeout", type=_positive_float,
                            help=f"shutdown grace in seconds (default {shown('TIMEOUT')})")
        parser.add_argument("-g", "--tag", help="tag shown in the dashboard")
        parser.add_argument("-e", "--environment",
                            help="environment name; 'development' logs the full traceback of failing jobs "
                            f"(default {shown('ENVIRONMENT', str, _debug_environment)})")
        parser.add_argument("--log-format", choices=("plain", "json"), help="job log format")
        parser.add_argument("--processes", metavar="N", help="fork N worker processes under one supervisor "
                            "(a number, a CPU multiplier like 1.5, or auto); 0: one process even if WURK['SWARM'] "
                            "is set (docs/swarm.md)")
        parser.add_argument("--redis-url", metavar="URL",
                            help="work on this Redis instead of WURK['REDIS'] (e.g. one shard)")
        parser.add_argument("--shard", metavar="NAME", help="work on the Redis named NAME in WURK['SHARDS']")
        parser.add_argument("--burst", action="store_true",
                            help="stop once the queues are empty and no job is running")
        parser.add_argument("--max-jobs", type=_positive_int, metavar="N",
                            help="exit (status 0) after starting N jobs so a supervisor starts a fresh process; "
                            "in a swarm the child is replaced at once")
        parser.add_argument("--health-port", type=_port, metavar="PORT",
                            help="serve HTTP GET /live and /ready on PORT for container probes")
        parser.add_argument("--pidfile", metavar="PATH", help="write the process id to PATH (removed at exit)")
        parser.add_argument("--reload", action="store_true", default=None,
                            help="restart when Python code changes, like runserver (default: settings.DEBUG)")
        parser.add_argument("--no-reload", action="store_false", dest="reload", help="never auto-reload")
        # -v is Django's --verbosity; level 2+ turns on DEBUG logs.

    def handle(self, *args, **options) -> None:
        bad = problems()
        if bad:
            for problem in bad:
                self.stderr.write(f"wurk: {problem}")
            sys.exit(1)
        try:
            config = Config(
                CONCURRENCY=options.get("concurrency"),
                QUEUES=options.get("queues"),
                CAPSULES=capsules.parse_cli(options.get("capsules")),
                TIMEOUT=options.get("timeout"),
                TAG=options.get("tag"),
                ENVIRONMENT=options.get("environment"),
                LOG_FORMAT=options.get("log_format"),
                VERBOSE=True if options.get("verbosity", 1) >= 2 else None,
                MAX_JOBS=options.get("max_jobs"),
                HEALTH_PORT=options.get("health_port"),
            )
            if options.get("redis_url") and options.get("shard"):
                raise ConfigurationError("give --redis-url or --shard, not both")
            config = config.for_shard(options.get("redis_url") or options.get("shard"))
            running = plan(config)  # a queue in two capsules (one may be -q's) stops here
            _check_fetch(config, running)
        except (ConfigurationError, ValueError) as exc:
            self.stderr.write(f"wurk: {exc}")
            sys.exit(1)
        processes = options.get("processes")
        swarm = processes != "0" and (processes is not None or bool(config.swarm))
        if swarm and options.get("burst"):
            self.stderr.write("wurk: --burst runs a single process; use it without --processes or WURK['SWARM']")
            sys.exit(1)
        if swarm and options.get("pidfile"):
            self.stderr.write("wurk: --pidfile runs with a single process; a swarm supervisor takes none")
            sys.exit(1)
        reload = options.get("reload")
        if swarm and reload:
            self.stderr.write("wurk: --reload runs a single process; use it without --processes or WURK['SWARM']")
            sys.exit(1)
        if reload is None:
            from django.conf import settings

            reload = bool(settings.DEBUG) and not swarm and not options.get("burst")
        if reload and os.environ.get(RELOAD_ENV) != "true":
            from ...server.reload import run_watcher_parent

            _configure_logging(config)
            sys.exit(run_watcher_parent())
        _configure_logging(config)
        for module in config.autodiscover:
            autodiscover_modules(module)
        boot_warnings.log_all(config)

        pipe = SignalPipe()
        pipe.install()
        version = self._connect(config, pipe)
        if version is None:
            return
        if version is ON_CLUSTER:
            self._run_on_cluster(config, pipe, swarm=swarm, burst=bool(options.get("burst")),
                                 pidfile=options.get("pidfile"), processes=processes)
            return
        if swarm:
            # Here, not at the top: a single worker process boots without the supervisor's modules.
            from ...server.swarm import run_swarm

            sys.exit(run_swarm(config, pipe, processes))

        pidfile = options.get("pidfile")
        if pidfile:
            _write_pidfile(pidfile)
        launcher = Launcher(config, on_signal=pipe.send_self)
        queues = ",".join(config.queue_names) if len(running) == 1 else capsules.describe(running)
        logger.info(BANNER.format(version=_version(), identity=launcher.state.identity, pid=os.getpid(),
                                  concurrency=launcher.concurrency, queues=queues, redis=version))
        watcher = None
        if reload:
            from ...server.reload import CodeWatcher

            watcher = CodeWatcher(lambda path: pipe.send_self("TERM"))
        try:
            try:
                launcher.run()
            except StartupError as exc:
                # A hook said no: one line naming it, its traceback, exit 1 (CORE-154).
                logger.error("wurk: %s; not starting", exc, exc_info=exc.__cause__)
                sys.exit(1)
            # Type=notify: systemd counts the unit started only now, with every processor fetching
            # and the process listed by its first beat (a thread of its own, started just above;
            # bounded, so a Redis slow at boot delays the notice, never withholds it).
            launcher.heartbeat.listed.wait(READY_WAIT)
            systemd.notify("READY=1", f"STATUS=fetching: {launcher.concurrency} threads on {queues}")
            if watcher is not None:
                watcher.start()
            self._supervise(launcher, pipe, burst=options.get("burst", False))
        finally:
            if watcher is not None:
                watcher.stop()
            if pidfile:
                _remove_pidfile(pidfile)
        if watcher is not None and watcher.changed is not None:
            sys.exit(3)  # the autoreloader's "start me again"

    def _connect(self, config: Config, pipe: SignalPipe) -> str | None:
        """Wait for a Redis >= 7.0, with backoff; TERM/INT while waiting exits cleanly."""
        delay = 1.0
        while True:
            try:
                client = get_redis(config=config)
                version = check_server(client, config)
            except RedisClusterError:
                return ON_CLUSTER  # a Redis Cluster node: the cluster worker's own boot (issue 46)
            except RedisVersionError as exc:
                self.stderr.write(f"wurk: {exc}")
                sys.exit(1)
            except redis_lib.RedisError as exc:
                logger.warning("Redis at %s is unreachable (%s); retrying in %.0fs", config.redis_url, exc, delay)
            else:
                try:
                    # Every Lua script, loaded once here (PRO-004): a swarm's children then find them too.
                    scripts.preload(client)
                    return version
                except redis_lib.ResponseError as exc:  # a script Redis refuses: no retry cures that
                    self.stderr.write(f"wurk: {exc}")
                    sys.exit(1)
                except redis_lib.RedisError as exc:
                    logger.warning("Redis at %s is unreachable (%s); retrying in %.0fs", config.redis_url, exc,
                                   delay)
            if any(name in ("TERM", "INT") for name in pipe.wait(delay)):
                logger.info("stopped while waiting for Redis")
                return None
            delay = min(delay * 2, 30.0)

    def _run_on_cluster(self, config: Config, pipe: SignalPipe, *, swarm: bool, burst: bool,
                        pidfile: str | None, processes: str | None = None) -> None:
        """The worker on a Redis Cluster (issue 46 stage 3): a feature switched on that is
        not converted yet exits 1 naming it (:mod:`...server.cluster_boot`); a swarm forks
        cluster workers (issue 46 item 3)."""
        from ...conf.validation import raw_settings
        from ...redis.cluster import shown
        from ...server import cluster_boot

        refused = cluster_boot.refusal(raw_settings(), config, swarm=swarm, burst=burst)
        if refused:
            self.stderr.write(f"wurk: {refused}")
            sys.exit(1)
        if swarm:
            from ...server.swarm import run_swarm

            sys.exit(run_swarm(config, pipe, processes, cluster=True))
        from ...server.cluster_worker import ClusterWorker

        if pidfile:
            _write_pidfile(pidfile)
        worker = ClusterWorker(config, on_signal=pipe.send_self)
        logger.info(BANNER.format(version=_version(), identity=worker.state.identity, pid=os.getpid(),
                                  concurrency=worker.concurrency,
                                  queues=(",".join(config.queue_names) if len(worker.capsules) == 1
                                          else capsules.describe(worker.capsules)),
                                  redis=f"Cluster at {shown(config.redis_url)}"))
        try:
            worker.run()
            worker.heartbeat.listed.wait(READY_WAIT)
            systemd.notify("READY=1", f"STATUS=fetching: {worker.concurrency} threads on a Redis Cluster")
            self._supervise(worker, pipe, burst=burst)  # type: ignore[arg-type]
        finally:
            if pidfile:
                _remove_pidfile(pidfile)

    def _supervise(self, launcher: Launcher, pipe: SignalPipe, burst: bool = False) -> None:
        stopping_since: float | None = None

        def stop() -> None:
            try:
                launcher.stop()
            finally:
                pipe.wake()  # the loop below sees `stopped` now, not at its next half second

        empty_polls = 0
        watchdog = systemd.Watchdog()
        while not launcher.stopped.is_set():
            names = pipe.wait(0.5)
            watchdog.tick()
            # Twice in a row, as run_burst does: a job between its queue and a thread is
            # invisible for an instant, never for a whole poll.
            empty_polls = empty_polls + 1 if burst and stopping_since is None and drained(launcher) else 0
            if empty_polls >= 2:
                logger.info("queues are empty: stopping (--burst)")
                stopping_since = time.monotonic()
                systemd.notify("STOPPING=1", "STATUS=stopping: the queues are empty (--burst)")
                spawn("stopper", stop)
            for name in names:
                if name in ("TERM", "INT"):
                    if stopping_since is None:
                        logger.info("%s received: stopping within %ss", name, launcher.config.timeout)
                        stopping_since = time.monotonic()
                        systemd.notify("STOPPING=1", f"STATUS=stopping: draining for up to {launcher.config.timeout:g}s")
                        spawn("stopper", stop)
                    else:
                        logger.warning("%s received again: requeueing running jobs and exiting now", name)
                        launcher.hard_shutdown()
                        launcher.deregister_now()
                        flush_all()
                        os._exit(1)
                elif name == "TSTP":
                    launcher.quiet()
                    if stopping_since is None:
                        systemd.notify("STATUS=quiet: running jobs finish, nothing new is fetched")
                elif name == "TTIN":
                    dump_threads()
                elif name == "USR1":
                    logger.info("USR1 ignored by a standalone worker")
                elif name == "USR2":
                    reopen_logs()
        pipe.restore()
        logging.shutdown()


def _settings_shown():
    """``shown(KEY)``: the value this project's settings give KEY, for ``--help``, saying
    whether it comes from ``settings.WURK`` or is the built-in default."""
    from ...conf import DEFAULTS, raw_settings

    try:
        raw = raw_settings()
    except Exception:  # settings that do not even load: the built-in defaults, as before
        raw = {}

    def shown(key: str, fmt=str, unset=None) -> str:
        if key in raw and raw[key] is not None:
            return f"{fmt(raw[key])}, from WURK['{key}']"
        if unset is not None:
            return unset()
        return fmt(DEFAULTS[key])

    return shown


def _debug_environment() -> str:
    from django.conf import settings

    return "development, as DEBUG is true" if settings.DEBUG else "none: DEBUG is false"


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise _arg_error(f"{value!r} is not a whole number") from None
    if number < 1:
        raise _arg_error(f"{value!r} must be at least 1")
    return number


def _positive_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise _arg_error(f"{value!r} is not a number of seconds") from None
    if number <= 0:
        raise _arg_error(f"{value!r} must be more than 0")
    return number


def _port(value: str) -> int:
    number = _positive_int(value)
    if number > 65535:
        raise _arg_error(f"{value!r} is not a TCP port (1-65535)")
    return number


def _write_pidfile(path: str) -> None:
    """Write our pid to ``path``, refusing if it names another live process."""
    try:
        with open(path) as existing:
            other = int(existing.read().strip() or 0)
    except (OSError, ValueError):
        other = 0
    if other and other != os.getpid():
        try:
            os.kill(other, 0)
        except ProcessLookupError:
            pass  # stale: that process is gone
        except PermissionError:  # alive, owned by another user
            raise SystemExit(f"wurk: pidfile {path} names running process {other}") from None
        else:
            raise SystemExit(f"wurk: pidfile {path} names running process {other}")
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as handle:
            handle.write(f"{os.getpid()}\n")
        os.replace(tmp, path)  # atomic: a reader never sees a half-written file
    except OSError as exc:
        raise SystemExit(f"wurk: cannot write pidfile {path}: {exc}") from None


def _remove_pidfile(path: str) -> None:
    try:
        with open(path) as handle:
            if handle.read().strip() == str(os.getpid()):
                os.unlink(path)
    except OSError:
        pass


def _arg_error(message: str):
    import argparse

    return argparse.ArgumentTypeError(message)


def _version() -> str:
    return __version__


def _configure_logging(config: Config) -> None:
    """Give wurk's loggers a handler unless the project's LOGGING already did."""
    root = logging.getLogger("wurk_django")
    level = logging.DEBUG if config.verbose else logging.INFO
    root.setLevel(level)
    if root.handlers:
        return
    handler = BatchingStreamHandler(sys.stdout, interval=config.log_flush_interval)
    handler.setFormatter(JSONFormatter() if config.log_format == "json" else PlainFormatter())
    root.addHandler(handler)
    root.propagate = False
