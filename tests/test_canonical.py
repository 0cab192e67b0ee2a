"""Canonical JSON: the bytes Ruby's JSON.dump writes, with conformance vectors (ENT-004).

The vectors were produced by Ruby 3.1's ``JSON.dump`` and ``Digest::SHA256``;
when a ``ruby`` binary is on PATH the live comparison below runs as well.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import struct
import subprocess

import pytest

from wurk_django import canonical

# (value, Ruby JSON.dump(value), sha256 hex of that text)
VECTORS = [
    (1e+20, '1.0e+20', 'fd61ec0a227cf610dce5a11619da519207149c565181f754027fc7f042518e10'),
    (1e+16, '1.0e+16', '69cc4a37597f8ca87d2b88380adc098b1ad28e18d1e0be2aef4aaf0faba3cba5'),
    (1000000000000000.0, '1.0e+15', '66772242b1a08649d9111e7f8ef38dce2cece8bb6ffe1641e4e4566101c95782'),
    (123456789012345.0, '123456789012345.0', '993873347168db0690f64d35bb2bea829c7baeee6ac14a597983bff1cdf58e56'),
    (1234567890123456.0, '1.234567890123456e+15', '8c247e73982d557864f5c5c58062c1040e64c6b5b5075b75a16cf53d53df4101'),
    (0.0001, '0.0001', 'e539aebac7fd2ed8aba8854fedeaa65436962f8ee1c82341b394698f085b6496'),
    (1e-05, '1.0e-05', '4c6cf1efa5dca3d548a7803c7ed6e27ae2d988551d8213bc5b5936274d3c9dc6'),
    (2.5e-05, '2.5e-05', 'ec77d0966dfe0fa02d02f206dea8d2649300174854c17e7134d972fecf3b01de'),
    (-1e-07, '-1.0e-07', '7a1aad8d12ce79dd756e3bf0061e975ac66b1e176a2c86a400fb5cdb633723ee'),
    (1.5, '1.5', '9f29a130438b81170b92a42650f9a94291ecad60bd47af2a3886e75f7f728725'),
    (-0.0, '-0.0', 'c26617c7ccbcaa6631b45d851b8cf56e21d2ca624bdb1193afdbd4b560702cec'),
    (0.0, '0.0', '8aed642bf5118b9d3c859bd4be35ecac75b6e873cce34e7b6f554b06f75550d7'),
    (100.0, '100.0', '43b87f618caab482ebe4976c92bcd6ad308b48055f1c27b4c574f3e31d7683e0'),
    (123456.789, '123456.789', 'df16e278bec8bd79b90a36552e05a4179549b0870da68fbe2580a8a920597ef4'),
    (5e-324, '5.0e-324', 'c5a1c1cc25110bf3657a3dd6c1a3a088d062041b703c62717011b8dca6b8f084'),
    (1.7976931348623157e+308, '1.7976931348623157e+308', 'c2784e1abd6317452708f3fbf9641c16b959561bc621a1d408c23a20aa2cb585'),
    ('a\x1f\x00\x7f\n\t\r\x08\x0c"/\\', '"a\\u001f\\u0000\x7f\\n\\t\\r\\b\\f\\"/\\\\"', '099b6aacd854813e49340c62491e338312f229c385c98ded2f9f5ef695554c96'),
    ('é😀\u2028日本語', '"é😀\u2028日本語"', '7697021457479147f42668beac6f4fa2219060ad243827358024c2f312754ed0'),
    ({'k': [1, 2.0, None, True, False], 'ü': {'x': -1}}, '{"k":[1,2.0,null,true,false],"ü":{"x":-1}}', '9f3763122238defd4a4de846592b6e3b583c51d8974d80fac235402901eff1ff'),
    (['SyncAccount', 'default', [42]], '["SyncAccount","default",[42]]', '3d76b6b3bab142d198ff91dc65d9c6d2aa6271d3bee94825e6a1461354fa6268'),
    (10000000000000000000, '10000000000000000000', '54a3c87634d6676581f460f0b80f424441bbb4d844369560a7b1ed2c7bc2b857'),
    (-42, '-42', 'fec80006df0542549b4cbaafb8987eee00bb49bca396eefe9ac8be5b5928e8f6'),
    ('', '""', '12ae32cb1ec02d01eda3581b127c1fee3b0dc53572ed6baf239721a03d82e126'),
    ([], '[]', '4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945'),
    ({}, '{}', '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a'),
]


@pytest.mark.parametrize(("value", "ruby_json", "sha"), VECTORS)
def test_conformance_vectors(value, ruby_json, sha):
    assert canonical.dumps(value) == ruby_json
    assert canonical.sha256_hex(value) == sha


def test_round_trips_and_refuses_what_json_cannot_hold():
    for value, ruby_json, _sha in VECTORS:
        back = json.loads(ruby_json)
        assert back == value or (isinstance(value, float) and math.copysign(1, back) == math.copysign(1, value))
    with pytest.raises(TypeError):
        canonical.dumps(object())
    assert canonical.dumps((1, "x")) == '[1,"x"]'
    assert canonical.dumps({1: "a"}) == '{"1":"a"}'


# -- live comparison with Ruby ---------------------------------------------------------------

NO_RUBY = "ruby is not installed, so the live comparison with Ruby's JSON.dump cannot run (apt install ruby)"
needs_ruby = pytest.mark.skipif(shutil.which("ruby") is None, reason=NO_RUBY)

FLOATS = [0.1, 1e16, 1e-5, 1000000000000000.5, 123456789.123456789, -0.0, 1e300, 5e-324, 2.5, 100.0,
          1e15, 1234567890123456.0, 9007199254740993.0, 0.0001, 0.00012345, -1.5e-7, 1.7976931348623157e308,
          2.2250738585072014e-308, float("nan"), float("inf"), float("-inf")]
STRINGS = ["é", "日本", "😀", "\u2028", "\u2029", "line\nbreak", "\x00\x01\x08\x0b\x1f\x7f", "tab\tcr\rff\f",
           'say "hi"', "back\\slash", "a/b</script>", "mixed é/日本\u2028😀\x1b", "\ufeffbom", ""]
NESTED = [
    {"k": [1, 2.0, None, True, False], "ü": {"x": -1, "日": [[], {}]}},
    [10**30, -(2**70), 0, -1, [1e20, [0.5, ["é\n"]]]],
    {"b": 1, "a": 2, "": None, "\u2028": "\u2029"},
    [{"float": 1e15 * 3 + 0.5, "tiny": 5e-324}, ["/", "\\", '"']],
]
VALUES = FLOATS + STRINGS + NESTED


def ruby(script: str, values: list) -> list:
    """Run ``script`` with ``values`` (sent as JSON, floats exact) bound to ``values``;
    the script prints one JSON array, which is returned."""
    program = f"require 'json'; require 'digest'; values = JSON.parse(STDIN.read, allow_nan: true); {script}"
    done = subprocess.run(["ruby", "-e", program], input=json.dumps(values).encode(), capture_output=True,
                          timeout=120, check=True)
    return json.loads(done.stdout)


@needs_ruby
def test_dumps_writes_the_bytes_ruby_writes():
    """Floats, unicode (U+2028 and "/" stay as they are), control characters and nested values."""
    out = ruby("puts JSON.dump(values.map { |v| JSON.dump(v).unpack1('H*') })", VALUES)
    ours = [canonical.dumps(v).encode("utf-8").hex() for v in VALUES]
    mismatches = [(v, bytes.fromhex(r), bytes.fromhex(o)) for v, r, o in zip(VALUES, out, ours) if r != o]
    assert len(out) == len(VALUES)
    assert mismatches == []


@needs_ruby
def test_unique_digests_equal_the_ones_ruby_computes():
    """A unique job's key: ``unique:`` + SHA-256 of ``JSON.dump([class, queue, args])`` (ENT-203)."""
    from wurk_django.unique.lock import lock_key

    script = ("puts JSON.dump(values.map { |args| "
              "'unique:' + Digest::SHA256.hexdigest(JSON.dump(['shop.jobs.Sync', 'low', args])) })")
    arguments = [[v] for v in VALUES] + [VALUES]
    out = ruby(script, arguments)
    assert out == [lock_key({"class": "shop.jobs.Sync", "queue": "low", "args": a}) for a in arguments]


@needs_ruby
def test_loop_ids_equal_the_ones_ruby_computes():
    """A periodic loop id: the first 16 hex digits of SHA-1 over ``"<schedule>|<class>|<JSON.dump of the
    options but tz, sorted by key>"`` (ENT-402)."""
    from wurk_django.periodic.loops import lid_for

    registrations = [{"args": [v], "queue": "low", "label": "nightly ✓", "tz": "Asia/Tokyo"}
                     for v in VALUES if not (isinstance(v, float) and not math.isfinite(v))]
    script = ("puts JSON.dump(values.map { |o| o = o.reject { |k, _| k == 'tz' }.sort.to_h; "
              "Digest::SHA1.hexdigest(\"0 4 * * *|shop.jobs.Nightly|#{JSON.dump(o)}\")[0, 16] })")
    out = ruby(script, registrations)
    assert out == [lid_for("0 4 * * *", "shop.jobs.Nightly", options) for options in registrations]


@needs_ruby
def test_random_floats_against_ruby():
    """Random bit patterns (every exponent, subnormals included) and the 1e15..1e17 boundary."""
    rng = random.Random(4)
    values = [1e15 * k + 0.5 for k in range(1, 9)] + [10.0 ** e for e in range(-8, 22)] + [1 / 3, -2.5e-9, 6.02e23]
    values += [rng.uniform(-10, 10) * 10.0 ** rng.randint(-30, 30) for _ in range(500)]
    values += [float(rng.randint(1, 10**17)) for _ in range(200)]
    values += [rng.uniform(1e15, 1e17) for _ in range(300)]
    bits = [rng.getrandbits(64) for _ in range(3000)]
    values += [v for v in (struct.unpack("<d", struct.pack("<Q", b))[0] for b in bits) if math.isfinite(v)]
    out = ruby("puts JSON.dump(values.map { |v| JSON.dump(v) })", values)
    assert [canonical.dumps(v) for v in values] == out


@needs_ruby
def test_batch_callback_entries_equal_the_ones_ruby_writes():
    """A batch stores callback entries as Ruby's ``to_json`` writes them and dedupes them by their
    exact text, so an entry registered from Python must be the bytes Ruby would have written."""
    from wurk_django.batch.batch import encode_entry

    entries = [["success", "shop.Callbacks#done", {"value": v, "note": "é/日本"}]
               for v in VALUES if not (isinstance(v, float) and not math.isfinite(v))]
    out = ruby("puts JSON.dump(values.map { |e| e.to_json.unpack1('H*') })", entries)
    assert out == [encode_entry(e).encode("utf-8").hex() for e in entries]


@needs_ruby
def test_limiter_options_and_fingerprints_equal_the_ones_ruby_computes():
    """A limiter's metadata holds ``JSON.dump`` of its options and SHA-256 of
    ``"<type>|<name>|<that JSON>"`` (ENT-004), compared across languages."""
    from wurk_django import limiter

    refills = [v for v in FLOATS if math.isfinite(v) and v >= 0] + [0, 3, 10**20]
    built = [limiter.points("p-1", 10, refill, register=False) for refill in refills]
    script = ("puts JSON.dump(values.map { |r| o = JSON.dump({'initial' => 10, 'refill' => r, 'backoff' => nil, "
              "'ttl' => 7776000}); [o, Digest::SHA256.hexdigest(\"points|p-1|#{o}\")] })")
    out = ruby(script, refills)
    assert out == [[lim.options_json, lim.fingerprint] for lim in built]
