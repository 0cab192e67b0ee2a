"""settings.WURK: defaults, validation, queue specs (CORE-101, CORE-240, DJ-001)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings

from tests.support import PACKAGE
from wurk_django import conf
from wurk_django.conf import DEFAULTS, Config, get_config, parse_queue, problems, redis_url, table
from wurk_django.errors import ConfigurationError

ROOT = Path(__file__).resolve().parent.parent


def test_defaults_valid_and_empty_settings_have_no_problems():
    assert problems({}) == []
    assert problems(dict(DEFAULTS)) == []


def test_one_row_per_key_and_defaults_come_from_the_rows():
    names = [s.name for s in conf.SETTINGS]
    assert len(names) == len(set(names))  # issue 11 item 4: one row each
    assert DEFAULTS == {s.name: s.default for s in conf.SETTINGS}
    assert all(s.want and s.doc and s.section for s in conf.SETTINGS)


def test_docs_hold_exactly_the_generated_table():
    """docs/configuration.md's tables are generated: `python -m wurk_django.settings_doc`."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    begin, end = text.find(conf.MARKDOWN_BEGIN), text.find(conf.MARKDOWN_END)
    assert begin >= 0 and end > begin, "docs/configuration.md lost its generated-table markers"
    in_docs = text[begin:end + len(conf.MARKDOWN_END)] + "\n"
    assert in_docs == conf.markdown(), "regenerate with: python -m wurk_django.settings_doc"


def test_a_rows_check_is_what_problems_applies(monkeypatch):
    row = conf.Setting("SOME_FEATURE", 3, lambda v: v in (1, 2, 3), "1, 2 or 3", "A test row.",
                       parse=str, type=str)
    monkeypatch.setattr(table, "_current", table.Table((*conf.SETTINGS, row)))
    assert conf.DEFAULTS["SOME_FEATURE"] == 3
    assert problems({"SOME_FEATURE": 2}) == []
    [problem] = problems({"SOME_FEATURE": 7})
    assert str(problem) == "WURK['SOME_FEATURE']: 7 is not 1, 2 or 3"
    assert "| `SOME_FEATURE` | `3` | A test row. |" in conf.markdown().split("### Features")[1]
    assert Config({}).some_feature == "3"  # the row's parse fills the typed attribute
    assert Config({"SOME_FEATURE": 2}).some_feature == "2"


def test_unknown_key_is_reported_with_a_suggestion():
    [problem] = problems({"redis_url": "redis://x:6379/1"})
    assert problem.key == "redis_url"
    assert problem.message == "unknown setting"
    assert "REDIS_URL" in problem.hint
    assert "did you mean" in str(problem)


def test_unknown_key_without_close_match_points_at_the_docs():
    [problem] = problems({"CONCURENCY_LIMIT": 3})
    assert "docs/configuration.md" in problem.hint


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("CONCURRENCY", 0),
        ("CONCURRENCY", "5"),
        ("CONCURRENCY", True),  # bool is an int subclass; must not pass as 1
        ("QUEUES", []),
        ("QUEUES", "default"),
        ("TIMEOUT", 0),
        ("TIMEOUT", False),
        ("MAX_RETRIES", -1),
        ("DEAD_MAX_JOBS", 0),
        ("ON_COMPLEX_ARGUMENTS", True),
        ("ON_COMPLEX_ARGUMENTS", "ignore"),
        ("DEFAULT_JOB_OPTIONS", [("retry", 3)]),
        ("LABELS", ["ok", 3]),
        ("REDIS_URL", "localhost:6379"),
        ("REDIS", 6379),
        ("LOG_FORMAT", "xml"),
        ("LOG_FLUSH_INTERVAL", -0.1),
        ("LOG_FLUSH_INTERVAL", "fast"),
        ("MODE", "threads"),
        ("ENQUEUE_ON_COMMIT", "yes"),
        ("ERROR_HANDLERS", [42]),
        ("CLIENT_MIDDLEWARE", [3]),
        ("IMPORT_ON_MISS", "myapp"),
    ],
)
def test_wrong_types_are_reported(key, value):
    found = problems({key: value})
    assert [p.key for p in found] == [key]
    assert repr(value) in found[0].message


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("CONCURRENCY", 1),
        ("TIMEOUT", 2.5),
        ("ON_COMPLEX_ARGUMENTS", False),
        ("ON_COMPLEX_ARGUMENTS", "warn"),
        ("REDIS", {"URL": "redis://h:6379/2", "POOL_SIZE": 3}),
        ("REDIS", "redis://h:6379/2"),
        ("CLIENT_MIDDLEWARE", ["a.b.C", ("a.b.D", {"x": 1})]),
        ("MODE", "embedded"),
        ("IMPORT_ON_MISS", ["myapp"]),
    ],
)
def test_good_values_pass(key, value):
    assert problems({key: value}) == []


def test_bad_queue_spec_is_a_problem():
    found = problems({"QUEUES": ["default", "bad\x7fname,2", "low,x"]})
    assert [p.key for p in found] == ["QUEUES", "QUEUES"]
    assert "bad\\x7fname" in str(found[0])
    assert "'x'" in str(found[1])


def test_config_refuses_problems_with_every_message():
    with pytest.raises(ConfigurationError) as info:
        Config({"CONCURRENCY": 0, "BOGUS": 1})
    assert "CONCURRENCY" in str(info.value) and "BOGUS" in str(info.value)


def test_settings_wurk_must_be_a_dict():
    with override_settings(WURK=["REDIS_URL"]), pytest.raises(ConfigurationError, match="must be a dict"):
        conf.raw_settings()


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("default", ("default", 0)),
        ("critical,5", ("critical", 5)),
        (" low , 2 ", ("low", 2)),
        (["mail", 3], ("mail", 3)),
        (("mail",), ("mail", 0)),
        ("a:b.c-d_9", ("a:b.c-d_9", 0)),
        ("Upper", ("Upper", 0)),
        # Issue 26 item 7: any name Sidekiq accepts (only a comma is taken as the weight's separator).
        ("mailers/high,3", ("mailers/high", 3)),
        ("café", ("café", 0)),
        ("queue:x|y", ("queue:x|y", 0)),
        (["with space", 1], ("with space", 1)),
    ],
)
def test_parse_queue(spec, expected):  # CORE-101
    assert parse_queue(spec) == expected


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("with\ttab", "control characters"),
        ("", "control characters"),
        ("q,-1", ">= 0"),
        ("q,1.5", "integer"),
        (["q", "x"], "integer"),
        (5, "must be 'name'"),
        (["a", 1, 2], "must be 'name'"),
        ("new\nline", "control characters"),
    ],
)
def test_parse_queue_errors(spec, match):
    with pytest.raises(ConfigurationError, match=match):
        parse_queue(spec)


@pytest.mark.parametrize(
    ("queues", "mode"),
    [(["a", "b"], "strict"), (["a,1", "b,1"], "random"), (["a,3", "b,1"], "weighted"), (["a,2", "b,2"], "weighted")],
)
def test_queue_mode(queues, mode):  # CORE-101
    assert Config({"QUEUES": queues}).queue_mode == mode


def test_queue_names_are_unique_in_order():
    assert Config({"QUEUES": ["b,2", "a,1", "b,2"]}).queue_names == ["b", "a"]


def test_redis_url_precedence(monkeypatch):
    monkeypatch.setenv("REDIS_URL", "redis://env:6379/3")
    assert redis_url({}) == "redis://env:6379/3"
    assert redis_url({"REDIS_URL": "redis://key:6379/4"}) == "redis://key:6379/4"
    assert redis_url({"REDIS_URL": "redis://key:6379/4", "REDIS": {"URL": "redis://dict:6379/5"}}) == "redis://dict:6379/5"
    assert redis_url({"REDIS_URL": "redis://key:6379/4", "REDIS": "redis://str:6379/6"}) == "redis://str:6379/6"
    monkeypatch.delenv("REDIS_URL")
    assert redis_url({}) == "redis://localhost:6379/0"


def test_config_resolves_defaults_and_overrides():
    cfg = Config({"CONCURRENCY": 3, "DEFAULT_JOB_OPTIONS": {"retry": 4, "backtrace": True},
                  "REDIS": {"URL": "redis://h:1/2", "OPTIONS": {"ssl": False}}}, concurrency=9)
    assert cfg.concurrency == 9  # explicit override (the command's flags) beats settings
    assert cfg.default_job_options == {"retry": 4, "queue": "default", "backtrace": True}
    assert cfg.redis_url == "redis://h:1/2"
    assert cfg.redis_options == {"ssl": False}
    assert cfg.redis_cache_alias is None
    assert cfg.max_retries == 25
    assert cfg.dead_max_jobs == 10_000
    assert cfg.dead_timeout == 15_552_000  # CORE-140: 180 days
    assert cfg.queues == [("default", 0)]
    assert cfg["TIMEOUT"] == 25


def test_default_tag_is_the_project_directory():
    assert Config({}).tag == Path(settings.BASE_DIR).name
    assert Config({"TAG": "shop"}).tag == "shop"


def test_dotted_handlers_are_imported():
    cfg = Config({"ERROR_HANDLERS": ["os.path.basename"], "BACKTRACE_CLEANER": "os.path.normpath"})
    import os.path

    assert cfg.error_handlers == [os.path.basename]
    assert cfg.backtrace_cleaner is os.path.normpath


def test_get_config_follows_override_settings():  # DJ-001
    first = get_config()
    assert get_config() is first  # cached while settings.WURK is unchanged
    with override_settings(WURK={**settings.WURK, "CONCURRENCY": 11}):
        assert get_config().concurrency == 11
    assert get_config().concurrency == settings.WURK["CONCURRENCY"]


def test_get_config_raises_on_bad_settings():
    with override_settings(WURK={**settings.WURK, "QUEUES": []}), pytest.raises(ConfigurationError, match="QUEUES"):
        get_config()


# -- rows owned by features (issue 24 item 4) --------------------------------------------------

FEATURE_ROWS = {
    "unique": ["UNIQUE_JOBS"],
    "encryption": ["ENCRYPTION"],
    "limiter": ["LIMITER_BACKOFF", "LIMITER_ERRORS", "LIMITER_REDIS", "LIMITER_CAP_ACTION"],
    "statsd": ["STATSD"],
    "history": ["HISTORY"],
    "leader": ["LEADER"],
    "periodic": ["PERIODIC"],
    "workflow": ["WORKFLOW_RESULT_MAX_BYTES", "WORKFLOW_KEEP"],
    "http_api": ["HTTP_API_TOKENS", "HTTP_API_JOB_CLASSES", "HTTP_API_MAX_BODY_BYTES", "HTTP_API_MAX_ARGS_BYTES",
                 "HTTP_API_MAX_BULK", "HTTP_API_IDEMPOTENCY_TTL", "HTTP_API_RATE_LIMIT"],
    "queue_limits": ["QUEUE_LIMITS"],
    "results": ["TRACK_TTL"],
}


def test_each_features_rows_come_from_its_own_module():
    from wurk_django.conf import core

    owners = {row.name: "core" for row in core.ROWS}
    for feature in table.feature_modules():
        for row in importlib.import_module(feature).ROWS:
            assert row.name not in owners, f"{row.name} is declared in {owners[row.name]} and {feature}"
            owners[row.name] = feature.split(".")[1]
    assert {name: owner for name, owner in owners.items() if owner != "core"} == {
        name: feature for feature, names in FEATURE_ROWS.items() for name in names}
    assert [s.name for s in conf.SETTINGS] == list(owners)  # the table holds these rows and no others
    statsd_row = conf.SETTINGS[[s.name for s in conf.SETTINGS].index("STATSD")]
    assert statsd_row is importlib.import_module("wurk_django.statsd.settings").ROWS[0]


def test_a_features_settings_module_imports_only_the_row_type_and_validators():
    """So reading settings never loads a feature's engine (Redis, the worker)."""
    allowed = {"wurk_django.conf.setting", "wurk_django.conf.validators"}
    for module in table.feature_modules():
        path = PACKAGE.parent / Path(*module.split(".")).with_suffix(".py")
        imported = set()
        for node in ast.parse(path.read_text()).body:  # module level only: lazy imports run on demand
            if isinstance(node, ast.ImportFrom) and node.level:
                imported.add(".".join(module.split(".")[:-node.level] + [node.module]))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                imported.update(n for n in names if n.startswith("wurk_django"))
        assert imported and imported <= allowed, (module, imported - allowed)


def test_a_feature_package_keeps_its_settings_name_for_the_module():
    # Importing wurk_django.X.settings binds X.settings: a package that also imports
    # django.conf.settings under that name would lose it the first time settings are read.
    for module in table.feature_modules():
        package = importlib.import_module(module.rpartition(".")[0])
        assert package.settings is importlib.import_module(module)


def test_every_typed_read_has_its_declared_type():
    config = Config({})
    for row in conf.SETTINGS:
        if row.attribute_name:
            value = getattr(config, row.attribute_name)
            assert isinstance(value, row.type), (row.name, value, row.type)


def test_typed_reads_of_feature_settings():
    from wurk_django.leader import election
    from wurk_django.leader.settings import LeaderSettings
    from wurk_django.limiter.settings import LimiterRedis
    from wurk_django.statsd.settings import StatsdSettings

    default = Config({})
    assert default.statsd is None and default.unique_jobs is False and default.periodic == []
    assert default.limiter_redis is None and default.limiter_cap_action == "dead" and default.limiter_errors == ()
    # The leader's defaults are the ones the election itself falls back on.
    assert default.leader == LeaderSettings(election.TTL, election.RENEW_INTERVAL, election.FOLLOWER_INTERVAL,
                                            election.INITIAL_WAIT, election.CACHE_TTL)
    config = Config({"STATSD": {"HOST": "h", "TAGS": ["env:x"]}, "LEADER": {"TTL": 40},
                     "LIMITER_REDIS": {"URL": "redis://l:6379/1"}, "UNIQUE_JOBS": True})
    assert config.statsd == StatsdSettings(host="h", port=8125, tags=("env:x",))
    assert config.leader.ttl == 40.0 and config.leader.renew_interval == 15.0
    assert config.limiter_redis == LimiterRedis(url="redis://l:6379/1", pool_size=10)
    assert config.unique_jobs is True
    assert Config({"STATSD": "a.b.factory"}).statsd == StatsdSettings(client="a.b.factory")
    assert config.for_shard("redis://other:6379/2").statsd is config.statsd  # a shard keeps every setting


def test_a_feature_key_misspelt_gets_a_suggestion_and_a_missing_attribute_names_the_known_ones():
    [problem] = problems({"STATSDD": {}})
    assert problem.hint == "did you mean 'STATSD'?"
    with pytest.raises(AttributeError, match="no setting fills it.*concurrency"):
        Config({}).concurency  # noqa: B018


def test_a_key_declared_twice_is_refused():
    row = conf.SETTINGS[0]
    with pytest.raises(ConfigurationError, match="declared twice"):
        table.Table((row, row))
    other = conf.Setting("OTHER", 1, bool, "x", "y", attribute=row.attribute_name or "concurrency")
    with pytest.raises(ConfigurationError, match="both fill"):
        table.Table((*conf.SETTINGS, other))
    with pytest.raises(ConfigurationError, match="would replace Config.redis_url"):
        table.Table((conf.Setting("REDIS_URL", None, bool, "x", "y"),))  # a row must say attribute=""


@pytest.mark.parametrize("name", [
    "ADMIN", "CLIENT", "Config", "ConfigurationError", "DEFAULTS", "FEATURES", "LEADER_KEYS", "LIMITERS",
    "LOGGING", "MARKDOWN_BEGIN", "MARKDOWN_END", "MODES", "Problem", "QUEUE_NAME", "QUEUE_NAME_RULE", "REDIS",
    "REDIS_KEYS", "REDIS_SCHEMES", "RETRIES", "SETTINGS", "SWARM", "Setting", "TESTING_MODES", "VIA", "WORKER", "base_config",
    "cache_redis_params", "get_config", "is_queue_name", "markdown", "parse_queue", "periodic_problems",
    "problems", "raw_settings", "redis_url", "redis_url_problem", "reset_config",
])
def test_names_imported_from_the_old_conf_module_keep_working(name):
    namespace: dict = {}
    exec(f"from wurk_django.conf import {name}", namespace)  # the form users write
    assert namespace[name] is not None
