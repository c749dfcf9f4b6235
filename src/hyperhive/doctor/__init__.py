"""``hivectl doctor``: is this machine ready to run a hive, and is the hive well?

Each check says what it found and, when it failed, what to do. The machine's
checks (:mod:`.machine`) need no running hive; the hive's (:mod:`.services`)
ask the store, the coordinator and the configured forge and homeserver.
"""

from hyperhive.doctor.model import Check, DoctorReport, Status
from hyperhive.doctor.run import run_checks

__all__ = ["Check", "DoctorReport", "Status", "run_checks"]
