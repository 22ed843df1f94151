"""A compute agent's standing estimate of its guests' dirty rates.

A drain orders its moves and chooses their policies from the source's
estimate of how fast each guest dirties memory (compute API
``sample_dirty_rates``). Measured fresh, that estimate is one sampling
window (1 s) during which the link carries nothing: on a drain of five
128 MiB guests through a 32 MiB/s link, 5 % of the drain's bound
(doc/source/drain.rst). The agent therefore samples its guests in the
background (``[compute] dirty_rate_sample_interval``) and keeps the
last answer per guest here; a caller that accepts an answer of a given
age (``max_age``) gets the kept ones at once and waits only for the
guests that have none that young.

A kept rate is as old as its sample: a guest that started writing since
is under-estimated until the next one. The drain's per-move policy and
the migration's own policy tiers still act on what the migration
measures while it copies, so a stale rate costs a worse order or share,
never a guest left unmoved.
"""

import threading
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class DirtyRateBook:
    """The newest sample of each guest, with when it was taken.

    Thread-safe: the periodic sampler writes while RPC threads read.
    """

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._kept = {}
        self._figures = None
        self._lock = threading.Lock()

    def keep(self, answer):
        """Keep a driver's sample_dirty_rates answer, taken now. Guests
        it could not measure are kept too (their reason is an answer)."""
        now = self._clock()
        with self._lock:
            for uuid, guest in answer.get('guests', {}).items():
                self._kept[uuid] = (now, dict(guest))
            self._figures = answer.get('figures')

    def young(self, instance_uuids, max_age):
        """({uuid: kept answer with its ``age`` in seconds} of the
        guests sampled at most ``max_age`` seconds ago, the others'
        uuids in their order, the kept prediction figures)."""
        now = self._clock()
        found, missing = {}, []
        with self._lock:
            for uuid in instance_uuids:
                kept = self._kept.get(uuid)
                if kept is None or max_age <= 0 or now - kept[0] > max_age:
                    missing.append(uuid)
                    continue
                found[uuid] = dict(kept[1], age=round(now - kept[0], 1))
            return found, missing, self._figures

    def forget_except(self, present):
        """Drop the guests no longer on this host."""
        with self._lock:
            for uuid in set(self._kept) - set(present):
                del self._kept[uuid]


def sample(driver, book, instance_uuids, seconds, max_age=0):
    """The driver's sample_dirty_rates answer for these guests, the
    guests the book holds a sample of at most ``max_age`` seconds old
    answered from it (each with its ``age``), only the others sampled
    now (``age`` 0), and kept.

    Idempotent: a repeat answers from the book or measures again.
    """
    found, missing, figures = book.young(instance_uuids, max_age)
    if missing:
        answer = driver.sample_dirty_rates(missing, seconds)
        book.keep(answer)
        for uuid, guest in answer['guests'].items():
            found[uuid] = dict(guest, age=0.0)
        figures = answer['figures']
    return {'guests': found, 'figures': figures}


def sample_all(driver, book, busy, seconds, batch):
    """Sample every guest of this host but those ``busy`` (migrating
    out: a guest's migration measures it better), ``batch`` at a time;
    forget the guests that left. Periodic: [compute]
    dirty_rate_sample_interval. Never raises: a guest that cannot be
    measured is kept with why, a driver error is logged."""
    try:
        present = list(driver.list_guests())
    except Exception as exc:    # noqa: BLE001 - logged, next period retries
        LOG.warning("Dirty-rate sampling skipped: cannot list the guests: "
                    "%s", exc)
        return 0
    book.forget_except(present)
    wanted = [uuid for uuid in present if uuid not in busy()]
    for start in range(0, len(wanted), batch):
        try:
            book.keep(driver.sample_dirty_rates(
                wanted[start:start + batch], seconds))
        except Exception as exc:    # noqa: BLE001 - logged, as above
            LOG.warning("Dirty-rate sampling of %d guest(s) failed: %s",
                        len(wanted[start:start + batch]), exc)
    return len(wanted)
