"""The benchmark's Django app for wurk_django: three job shapes in jobs.py."""
