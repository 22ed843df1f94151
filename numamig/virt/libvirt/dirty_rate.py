"""Sample a guest's dirty rate on its host, and predict its migration.

libvirt (>= 7.2, QEMU >= 5.2) measures how fast a running guest dirties
memory: ``virDomainStartDirtyRateCalc(seconds, mode)`` starts a
measurement, the ``dirtyrate.*`` domain statistics give its status and,
once measured, ``dirtyrate.megabytes_per_second``. Three modes exist:
page sampling (hashes sampled pages; QEMU 5.2, any accelerator),
dirty bitmap and dirty ring (libvirt 8.1, QEMU 6.2; both need KVM's dirty
logging, so not TCG). They are tried in that order; the first that
measures wins. Where none does (the libvirt test driver, an old QEMU)
the rate is unknown and the prediction says so: it is never guessed.

Measured here (libvirt 9.0, QEMU 7.2, TCG): page sampling measures (0 B/s
for an idle guest, 84-96 MiB/s for the real tier's dirtying guest);
dirty ring is refused ("requires dirty-ring feature enabled"); dirty
bitmap made QEMU drop its monitor connection (the guest died). So on
TCG (virt_type qemu) only page sampling is ever tried.
"""

import time

import libvirt
from oslo_log import log as logging

from numamig.convergence import policy as pol
from numamig.convergence import predict

LOG = logging.getLogger(__name__)

MIB = 1024 * 1024
MODES = (
    ('page-sampling',
     getattr(libvirt, 'VIR_DOMAIN_DIRTYRATE_MODE_PAGE_SAMPLING', 0)),
    ('dirty-bitmap',
     getattr(libvirt, 'VIR_DOMAIN_DIRTYRATE_MODE_DIRTY_BITMAP', 1)),
    ('dirty-ring', getattr(libvirt, 'VIR_DOMAIN_DIRTYRATE_MODE_DIRTY_RING',
                           2)),
)
STATS_DIRTYRATE = getattr(libvirt, 'VIR_DOMAIN_STATS_DIRTYRATE', 512)
MEASURED = getattr(libvirt, 'VIR_DOMAIN_DIRTYRATE_MEASURED', 2)
# The first look at a measurement, past its own duration, doubled after.
FIRST_LOOK_S = 0.05


def modes_for(virt_type):
    """The modes worth trying for guests of ``virt_type``: the dirty-log
    modes need KVM (and dirty bitmap killed a TCG guest here)."""
    return MODES if virt_type == 'kvm' else MODES[:1]


def sample(conn, dom, seconds=1, deadline_s=10.0, clock=time.monotonic,
           sleep=time.sleep, modes=None):
    """The guest's dirty rate, by the first of ``modes`` (default: all)
    that measures.

    :returns: (bytes per second, mode name), or (None, why not).
    """
    refusals = []
    for name, flag in modes or MODES:
        try:
            dom.startDirtyRateCalc(seconds, flag)
        except libvirt.libvirtError as exc:
            refusals.append(f"{name}: {exc.get_error_message()}")
            continue
        rate = _wait_measured(conn, dom, seconds, deadline_s, clock, sleep)
        if rate is not None:
            return rate * MIB, name
        refusals.append(f"{name}: no result within {deadline_s:g} s")
    return None, '; '.join(refusals)


def sample_many(conn, doms, seconds=1, deadline_s=10.0,
                clock=time.monotonic, sleep=time.sleep, modes=None):
    """Sample several guests' dirty rates at once: one window of
    ``seconds`` for all of them, so a drain of many guests learns their
    rates in about the time one takes (a drain plan's estimate).

    Each guest tries the ``modes`` in order (default: all) as ``sample``
    does; the guests a mode measured are done, the others try the next.

    :returns: {uuid: (bytes per second, mode name) or (None, why not)}.
    """
    answers = {}
    refusals = {dom.UUIDString(): [] for dom in doms}
    todo = list(doms)
    for name, flag in modes or MODES:
        started = []
        for dom in todo:
            try:
                dom.startDirtyRateCalc(seconds, flag)
            except libvirt.libvirtError as exc:
                refusals[dom.UUIDString()].append(
                    f"{name}: {exc.get_error_message()}")
                continue
            started.append(dom)
        measured = _wait_all_measured(conn, started, seconds, deadline_s,
                                      clock, sleep)
        for dom in started:
            uuid = dom.UUIDString()
            if uuid in measured:
                answers[uuid] = (measured[uuid] * MIB, name)
            else:
                refusals[uuid].append(
                    f"{name}: no result within {deadline_s:g} s")
        todo = [dom for dom in todo if dom.UUIDString() not in answers]
        if not todo:
            break
    for dom in todo:
        answers[dom.UUIDString()] = (
            None, '; '.join(refusals[dom.UUIDString()]))
    return answers


def _wait_all_measured(conn, doms, seconds, deadline_s, clock, sleep):
    """{uuid: dirtyrate.megabytes_per_second} of the ``doms`` measured
    within ``deadline_s`` (one statistics call per look for all)."""
    if not doms:
        return {}
    ends = clock() + deadline_s
    sleep(seconds)
    delay = FIRST_LOOK_S
    measured = {}
    while True:
        waiting = [d for d in doms if d.UUIDString() not in measured]
        for dom, stats in _stats_many(conn, waiting):
            if stats.get('dirtyrate.calc_status') == MEASURED:
                measured[dom.UUIDString()] = stats.get(
                    'dirtyrate.megabytes_per_second', 0)
        if len(measured) == len(doms) or clock() + delay > ends:
            return measured
        sleep(delay)
        delay *= 2


def _stats_many(conn, doms):
    try:
        return conn.domainListGetStats(doms, STATS_DIRTYRATE)
    except libvirt.libvirtError as exc:
        LOG.debug("dirty-rate statistics of %d guests: %s", len(doms), exc)
        return []


def _wait_measured(conn, dom, seconds, deadline_s, clock, sleep):
    """dirtyrate.megabytes_per_second once measured, or None."""
    ends = clock() + deadline_s
    sleep(seconds)
    delay = FIRST_LOOK_S
    while True:
        stats = _stats(conn, dom)
        if stats.get('dirtyrate.calc_status') == MEASURED:
            return stats.get('dirtyrate.megabytes_per_second')
        if clock() + delay > ends:
            return None
        sleep(delay)
        delay *= 2


def _stats(conn, dom):
    try:
        found = conn.domainListGetStats([dom], STATS_DIRTYRATE)
    except libvirt.libvirtError as exc:
        LOG.debug("dirty-rate statistics of %s: %s", dom.UUIDString(), exc)
        return {}
    return found[0][1] if found else {}


def figures(settings):
    """What a prediction needs of this host's [libvirt] settings besides
    the guest and the link (numamig.convergence.drain_link.predictor):
    the timer policy's downtime (ms), the completion timeout per GiB
    (s) and what the timer does at it."""
    return {'downtime_ms': settings.downtime_ms,
            'timeout_s_per_gib': settings.completion_timeout_s,
            'timer_tiers': [] if settings.timeout_action == 'abort' else (
                [pol.POST_COPY] if settings.permit_post_copy
                else [pol.PAUSE])}


def prediction(settings, policy, memory, rate, method):
    """The prediction dict of a migration of a guest of ``memory`` bytes
    dirtying ``rate`` B/s (None: unknown) from a host of
    MigrationSettings ``settings``, under ``policy``."""
    gib = memory / (1024 ** 3)
    bandwidth = (settings.bandwidth_mib or
                 settings.emulated_bandwidth_mib) * MIB
    timer_tiers = () if settings.timeout_action == 'abort' else (
        (pol.POST_COPY,) if settings.permit_post_copy
        else (pol.PAUSE,))
    verdict = predict.for_policy(
        policy, memory, rate, bandwidth, settings.downtime_ms,
        settings.completion_timeout_s * max(gib, 1), timer_tiers,
        (settings.emulated_working_set_mib * MIB or None)
        if method == 'emulated' else None)
    reason = verdict.reason if rate is not None else \
        f"{verdict.reason} ({method})"
    return {'prediction': verdict.outcome, 'reason': reason,
            'predicted_elapsed_ms': verdict.elapsed_ms,
            'predicted_downtime_ms': verdict.downtime_ms,
            'sampled_dirty_rate': None if rate is None else int(rate),
            'dirty_rate_method': method if rate is not None else None,
            'policy': policy.name}
