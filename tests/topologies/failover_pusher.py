"""A pushing process for the failover tests: pushes ``FileRecordJob("p-<n>", seconds)``
through the client (reliable push on, the default) until the file named by its
second argument exists, writing each pushed value to the file named by its first
once the push call returned (written or buffered). A push that raises is written
to stderr and ends the process with status 1; pushes still buffered at the end
are delivered or reported by the client's exit handler (status 75).

Run as ``python tests/topologies/failover_pusher.py <pushed file> <stop file>
<seconds per job> <pushes per second>`` with DJANGO_SETTINGS_MODULE and
WURK_TEST_EXTRA set.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    import django

    django.setup()
    from tests.jobsapp.jobs import FileRecordJob

    pushed_file, stop_file, seconds, rate = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    n = 0
    with open(pushed_file, "a") as pushed:
        while not stop_file.exists():
            value = f"p-{n}"
            try:
                FileRecordJob.perform_async(value, seconds)
            except Exception as exc:
                print(f"push {value} raised {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                return 1
            pushed.write(value + "\n")
            pushed.flush()
            n += 1
            time.sleep(1 / rate)
    return 0


if __name__ == "__main__":
    sys.exit(main())
