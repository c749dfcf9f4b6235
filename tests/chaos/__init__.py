"""Chaos suites: kill -9, a full disk and corrupt files, then check nothing acknowledged is lost.

The default run is bounded for CI (a fixed seed, a few minutes); ``HIVE_CHAOS_FULL=1``
(what ``scripts/chaos`` sets) runs the full soak of the reliability issue.
"""
