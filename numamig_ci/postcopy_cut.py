"""A real post-copy migration whose link the harness cuts, and restores.

The guest (a numamig_ci.slow_copy.Hold) dirties a small set of its
memory, DIRTIED_MIB, for ever, and its pre-copy is capped at
PRECOPY_MIB MiB/s, so it never converges; its migration runs under
numamig_ci.local_deployment.POST_COPY_POLICY, which switches it to
post-copy at its second pass. Post-copy is capped too (POSTCOPY_MIB,
``virDomainMigrateSetMaxSpeed`` with the post-copy flag, what ``virsh
migrate-setspeed --postcopy`` does), so the harness can cut it midway.

Before the migration starts, the guest's vCPU has run long enough to
have dirtied its set (WARMUP_CPU_NS). The cut is two steps:

* the link to the destination's libvirtd (the deployment's proxy,
  ``cut_link``) resets the source's connection to it and refuses new ones;
* the post-copy stream between the two QEMUs breaks too (``break_stream``:
  ``virDomainAbortJobFlags(VIR_DOMAIN_ABORT_JOB_POSTCOPY)``, libvirt's
  way to break a post-copy stream from outside): cutting libvirt's
  connection alone leaves QEMU's stream running (measured on libvirt
  9.0: QEMU completed the copy, while libvirt had failed the job).

Nothing of numamig is patched: it sees a link that dropped during
post-copy and stays down, and recovers as it would from one.
"""

import time

import libvirt

from numamig_ci import libvirt_hosts
from numamig_ci import slow_copy

DIRTIED_MIB = 8
PRECOPY_MIB = 8
POSTCOPY_MIB = 4
# Cut once post-copy has sent this much (half a second at POSTCOPY_MIB).
CUT_AFTER = 2 * 1024 * 1024
POLL_S = 0.05
# vCPU time in which the kernel rewrites its set many times over (it
# writes ~85 MiB/s under TCG), and how long a loaded machine may take
# to give the guest that much. A guest that has not run yet is all zero
# pages, which cost QEMU nothing to send: its migration converges at
# once, whatever the cap.
WARMUP_CPU_NS = 1_000_000_000
WARMUP_LIMIT_S = 120
ABORT_JOB_POSTCOPY = getattr(libvirt, 'VIR_DOMAIN_ABORT_JOB_POSTCOPY', 1)
MAX_SPEED_POSTCOPY = getattr(libvirt,
                             'VIR_DOMAIN_MIGRATE_MAX_SPEED_POSTCOPY', 1)
PAUSED_POSTCOPY = getattr(libvirt, 'VIR_DOMAIN_PAUSED_POSTCOPY', 12)
PAUSED_POSTCOPY_FAILED = getattr(libvirt,
                                 'VIR_DOMAIN_PAUSED_POSTCOPY_FAILED', 13)
RUNNING_POSTCOPY_FAILED = getattr(libvirt,
                                  'VIR_DOMAIN_RUNNING_POSTCOPY_FAILED', 11)


def write_kernel(directory):
    """The kernel dirtying DIRTIED_MIB from 2 MiB up; return its path."""
    path = f'{directory}/dirtying-postcopy-{DIRTIED_MIB}m.bin'
    with open(path, 'wb') as f:
        f.write(libvirt_hosts.dirtying_kernel(2 + DIRTIED_MIB))
    return path


class PostCopyHold(slow_copy.Hold):
    """The next migration of guest ``uuid`` from the host at ``uri``,
    held in pre-copy until its policy switches it to post-copy, which
    crawls at POSTCOPY_MIB until ``cut``."""

    phase = (f'post-copy (a guest dirtying {DIRTIED_MIB} MiB, pre-copy '
             f'capped at {PRECOPY_MIB} MiB/s, post-copy at {POSTCOPY_MIB})')

    def __init__(self, uri, uuid, kernel_path, timeout):
        super().__init__(uri, uuid, kernel_path, timeout,
                         cap_mib=PRECOPY_MIB)

    def __enter__(self):
        super().__enter__()
        self._domain(lambda dom: dom.migrateSetMaxSpeed(
            POSTCOPY_MIB, MAX_SPEED_POSTCOPY))
        self._domain(self._warm_up)
        return self

    def _warm_up(self, dom):
        """Return once the guest's vCPU ran WARMUP_CPU_NS.

        :raises RuntimeError: it did not within WARMUP_LIMIT_S.
        """
        deadline = time.monotonic() + WARMUP_LIMIT_S
        while True:
            (vcpu, *_), _maps = dom.vcpus()
            if vcpu[2] >= WARMUP_CPU_NS:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the dirtying guest's vCPU ran {vcpu[2] / 1e9:.2f} s "
                    f"in {WARMUP_LIMIT_S} s")
            time.sleep(POLL_S)

    def _domain(self, action):
        conn = libvirt.open(self.uri)
        try:
            return action(conn.lookupByUUIDString(self.uuid))
        finally:
            conn.close()

    def wait_post_copy(self, timeout=None):
        """Return the bytes post-copy sent once it sent CUT_AFTER, or
        None if the job did not get there within ``timeout`` s (it ended,
        or never switched): libvirt's own view, the source domain paused
        for post-copy and its job statistics."""
        deadline = time.monotonic() + (timeout or self.timeout)

        def watch(dom):
            switched = None
            while time.monotonic() < deadline:
                try:
                    state = dom.state()
                    processed = dom.jobStats().get('memory_processed', 0)
                except libvirt.libvirtError:
                    return None
                if state == [libvirt.VIR_DOMAIN_PAUSED, PAUSED_POSTCOPY]:
                    if switched is None:
                        switched = processed
                    elif processed - switched >= CUT_AFTER:
                        return processed - switched
                elif switched is not None or not (
                        state[0] == libvirt.VIR_DOMAIN_RUNNING or
                        state == [libvirt.VIR_DOMAIN_PAUSED,
                                  libvirt.VIR_DOMAIN_PAUSED_MIGRATION]):
                    # Running (pre-copy) and paused for migration (the
                    # moment of the switch, before libvirt says
                    # post-copy) lead on; anything else ended the job.
                    return None
                time.sleep(POLL_S)
            return None
        return self._domain(watch)

    def break_stream(self):
        """Break the post-copy stream between the two QEMUs."""
        self._domain(lambda dom: dom.abortJobFlags(ABORT_JOB_POSTCOPY))

    def domain_state(self, uri):
        """[state, reason] of the guest on the host at ``uri``, or None
        where it is not defined."""
        conn = libvirt.open(uri)
        try:
            try:
                return conn.lookupByUUIDString(self.uuid).state()
            except libvirt.libvirtError:
                return None
        finally:
            conn.close()
