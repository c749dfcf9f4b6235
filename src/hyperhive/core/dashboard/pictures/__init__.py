"""The dashboard's pictures: inline SVG drawn on the server from plain data.

Every module here is pure (no I/O, no script, nothing fetched at run time):
a function from figures to markup, escaped with markupsafe, so each is
unit-tested on its geometry against known inputs. The pages read the hive
and hand these functions what they read.
"""
