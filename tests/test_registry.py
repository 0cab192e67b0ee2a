"""Job names and the registry (CORE-041..045)."""

from __future__ import annotations

import sys

import pytest

from tests.jobsapp import jobs
from tests.support import wurk_settings
from wurk_django import Job, job, registry
from wurk_django.errors import UnknownJobClass

LAZY = "tests.fixtures.lazyjobs"


@pytest.fixture(autouse=True)
def isolated(isolated_registry, monkeypatch):
    """Names registered by a test are forgotten after it, and so is the lazily imported module."""
    monkeypatch.delitem(sys.modules, LAZY, raising=False)
    yield
    sys.modules.pop(LAZY, None)


def test_default_name_is_the_dotted_path():  # CORE-041
    assert jobs.RecordJob.job_name == "tests.jobsapp.jobs.RecordJob"
    assert registry.resolve("tests.jobsapp.jobs.RecordJob") is jobs.RecordJob


def test_ruby_name_is_an_alias_and_the_pushed_name():  # CORE-042
    assert jobs.RubyNamedJob.job_name == "HardJob"
    assert registry.resolve("HardJob") is jobs.RubyNamedJob
    assert registry.resolve("tests.jobsapp.jobs.RubyNamedJob") is jobs.RubyNamedJob


def test_job_function_registers_under_its_dotted_path():
    assert jobs.add_numbers.job_name == "tests.jobsapp.jobs.add_numbers"
    assert registry.resolve("tests.jobsapp.jobs.add_numbers") is jobs.add_numbers.job_class


def test_job_function_with_ruby_name():
    @job(name="Billing::ChargeJob")
    def charge(account_id):
        return account_id

    assert charge.job_name == "Billing::ChargeJob"
    assert registry.resolve("Billing::ChargeJob") is charge.job_class


def test_unknown_name_raises_with_a_hint():  # CORE-045
    with pytest.raises(UnknownJobClass) as info:
        registry.resolve("NoSuchJob")
    assert "'NoSuchJob'" in str(info.value)
    assert "name = " in str(info.value)


def test_unknown_name_is_a_wurk_error_not_a_lookup_error():
    from wurk_django.errors import WurkError

    with pytest.raises(WurkError):
        registry.resolve("tests.jobsapp.jobs.Missing")


def test_pipe_in_a_name_is_refused():  # CORE-041
    with pytest.raises(ValueError, match=r"\|"):
        class Piped(Job):
            name = "a|b"


def test_taken_name_is_refused():
    with pytest.raises(ValueError, match="taken by tests.jobsapp.jobs.RubyNamedJob"):
        class Impostor(Job):
            name = "HardJob"


def test_reimporting_a_module_may_register_the_same_path_again():
    first = registry.resolve("tests.jobsapp.jobs.RecordJob")
    registry.register(type("RecordJob", (), {"__module__": "tests.jobsapp.jobs", "__qualname__": "RecordJob"}),
                      "tests.jobsapp.jobs.RecordJob")
    assert registry.resolve("tests.jobsapp.jobs.RecordJob") is not first


def test_class_defined_in_a_function_is_only_reachable_by_its_name():
    class Local(Job):
        def perform(self):
            pass

    assert "<locals>" in Local.job_name
    assert Local.job_name not in registry.registered()

    class NamedLocal(Job):
        name = "NamedLocal"

    assert registry.resolve("NamedLocal") is NamedLocal


def test_registered_is_a_copy():
    snapshot = registry.registered()
    snapshot["Fake"] = jobs.RecordJob
    with pytest.raises(UnknownJobClass):
        registry.resolve("Fake")


def test_import_on_miss_is_off_for_modules_outside_installed_apps():  # CORE-044
    with pytest.raises(UnknownJobClass):
        registry.resolve(f"{LAZY}.LazyJob")
    assert LAZY not in sys.modules


def test_import_on_miss_needs_an_allowed_prefix():  # CORE-044
    with wurk_settings(IMPORT_ON_MISS=["tests.fixtures"]):
        found = registry.resolve(f"{LAZY}.LazyJob")
    assert found.__name__ == "LazyJob"
    assert found().perform() == "lazy"


def test_prefix_must_match_whole_package_names():  # CORE-044: "tests.fix" must not allow "tests.fixtures"
    with wurk_settings(IMPORT_ON_MISS=["tests.fix"]), pytest.raises(UnknownJobClass):
        registry.resolve(f"{LAZY}.LazyJob")
    assert LAZY not in sys.modules


def test_imported_object_must_be_a_registered_job():  # CORE-044
    with wurk_settings(IMPORT_ON_MISS=["tests.fixtures"]), pytest.raises(UnknownJobClass):
        registry.resolve(f"{LAZY}.not_a_job")


def test_never_imports_stdlib_modules_named_by_a_payload():  # CORE-044
    sys.modules.pop("antigravity", None)
    with pytest.raises(UnknownJobClass):
        registry.resolve("antigravity.Fly")
    assert "antigravity" not in sys.modules


def test_missing_module_in_an_allowed_prefix_is_unknown_job_class():
    with wurk_settings(IMPORT_ON_MISS=["tests"]), pytest.raises(UnknownJobClass, match="cannot import"):
        registry.resolve("tests.nothing_here.Job")
