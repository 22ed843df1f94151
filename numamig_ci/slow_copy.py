"""A real live migration kept in progress until the harness aborts it.

To abort a migration libvirt really runs, the harness needs it to last:
a guest numamig creates is diskless and its memory is nearly all zero
pages, which QEMU sends as headers only, so even a copy capped at
1 MiB/s ends within seconds. The guest of the migration is therefore
given a workload and its copy a cap, both through libvirt, outside
numamig (no numamig process is patched; numamig sees a real, slow job):

* its persistent definition gets ``<os><kernel>`` naming a tiny
  multiboot kernel (numamig_ci.libvirt_hosts.dirtying_kernel) that
  rewrites one word of every 4 KiB page from 2 MiB to near the top of
  its memory (``dirtied_mib``) forever, and the guest is restarted from
  it; numamig's NUMA parts of the XML
  (pins, memnodes) are untouched;
* the source domain's migration speed is capped
  (``virDomainMigrateSetMaxSpeed``, what ``virsh migrate-setspeed``
  does); numamig passes no bandwidth of its own (``[libvirt]
  live_migration_bandwidth`` unset), so libvirt uses that cap.

The copy then never converges (up to 94 MiB dirtied again every pass,
sent at CAP_MIB MiB/s), and the migration stays ``running`` until the harness
aborts it or numamig's completion timeout (800 s per GiB by default)
does. Which moment the harness aborts at is ``Hold.wait``'s ``until``.
"""

import os
import time

import libvirt
from lxml import etree

from numamig.objects import fields
from numamig_ci import libvirt_hosts

STATUS = fields.MigrationStatus
STATES = {libvirt.VIR_DOMAIN_RUNNING: 'running',
          libvirt.VIR_DOMAIN_PAUSED: 'paused',
          libvirt.VIR_DOMAIN_SHUTOFF: 'shut off'}
# MiB/s: a pass over the dirtied 94 MiB takes ~24 s, longer than any
# abort takes to land, and shorter passes would give a convergence
# policy stalled passes to act on.
CAP_MIB = 4
# The dirtied range ends this far below the top of the guest's memory
# (the firmware's tables live there), and at most at 96 MiB.
TOP_MARGIN_MB = 16
MAX_TOP_MB = 96
MIN_MEMORY_MB = 32
# The phases a Hold can be aborted in.
RUNNING = 'running'
COPYING = 'copying'
# At most this long per migration_wait (the conductor bounds it too).
WAIT_SLICE_S = 30
# When the conductor answers a wait at once without a change (it holds
# as many waits as it allows), the harness waits this long on its own.
BUSY_PAUSE_S = 0.2


def dirtied_mib(memory_mb):
    """Where the dirtied range of a ``memory_mb`` guest ends (MiB).

    :raises ValueError: the guest is too small to dirty much.
    """
    if memory_mb < MIN_MEMORY_MB:
        raise ValueError(f"a guest of {memory_mb} MiB is too small to keep "
                         f"a copy busy (at least {MIN_MEMORY_MB} MiB)")
    return min(MAX_TOP_MB, memory_mb - TOP_MARGIN_MB)


def with_kernel(domain_xml, kernel_path):
    """``domain_xml`` booting ``kernel_path`` (``<os><kernel>``); every
    other part kept. Pure: returns new text."""
    root = etree.fromstring(domain_xml.encode())
    os_el = root.find('os')
    if os_el is None:
        os_el = etree.SubElement(root, 'os')
    kernel = os_el.find('kernel')
    if kernel is None:
        kernel = etree.SubElement(os_el, 'kernel')
    kernel.text = kernel_path
    return etree.tostring(root, encoding='unicode')


def reached(migration, until):
    """Whether ``migration`` (a record) is where the harness aborts it:
    ``running`` (the source recorded it and calls libvirt), or
    ``copying`` (running, and QEMU has sent memory)."""
    if migration.status != STATUS.RUNNING:
        return False
    return until == RUNNING or bool(migration.memory_processed)


def wait_until(api, ctxt, migration, until, timeout, clock=time.monotonic,
               sleep=time.sleep):
    """The record of ``migration`` once ``reached(until)``, or once it
    ended, or after ``timeout`` s, whichever comes first.

    Waits on the conductor's migration_wait (it answers at the next
    status or progress change), not on a fixed interval.
    """
    deadline = clock() + timeout
    while not reached(migration, until) and \
            migration.status not in STATUS.FINAL:
        left = deadline - clock()
        if left <= 0:
            break
        seen = (migration.status, migration.memory_processed)
        asked, wait_s = clock(), min(left, WAIT_SLICE_S)
        migration = api.migration_wait(ctxt, migration, wait_s)
        unchanged = (migration.status, migration.memory_processed) == seen
        if unchanged and clock() - asked < wait_s / 2:
            # Answered early without a change: the conductor is busy.
            sleep(BUSY_PAUSE_S)
    return migration


class Hold:
    """The next migration of guest ``uuid`` from the host at ``uri``,
    kept in progress (see the module doc) while the context lasts.

    :param kernel_path: the dirtying kernel, as that host's libvirtd
        (and its peers') sees the path.
    :param timeout: the longest ``wait`` waits.
    """

    phase = 'libvirt migrates it (a dirtying guest, its copy capped at ' \
            f'{CAP_MIB} MiB/s)'

    def __init__(self, uri, uuid, kernel_path, timeout, cap_mib=CAP_MIB):
        self.uri = uri
        self.uuid = uuid
        self.kernel_path = kernel_path
        self.timeout = timeout
        self.cap_mib = cap_mib

    def __enter__(self):
        conn = libvirt.open(self.uri)
        try:
            dom = conn.lookupByUUIDString(self.uuid)
            conn.defineXML(with_kernel(
                dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE),
                self.kernel_path))
            if dom.isActive():
                dom.destroy()
            dom.create()
            dom.migrateSetMaxSpeed(self.cap_mib, 0)
        finally:
            conn.close()
        return self

    def __exit__(self, *exc_info):
        """Nothing to undo: the harness deletes the guest afterwards."""

    def wait(self, session, migration, until=RUNNING):
        """(whether ``until`` was reached, the migration's record then,
        or as it was when it ended or the wait ran out)."""
        record = wait_until(session.api, session.ctxt, migration, until,
                            self.timeout)
        return reached(record, until), record

    def state(self):
        """The guest's libvirt state on this host: 'running', 'paused',
        another state's name, or 'absent'."""
        conn = libvirt.open(self.uri)
        try:
            try:
                dom = conn.lookupByUUIDString(self.uuid)
            except libvirt.libvirtError:
                return 'absent'
            return STATES.get(dom.state()[0], str(dom.state()[0]))
        finally:
            conn.close()

    def release(self):
        """Nothing holds the source: the abort ends the job."""


def kernel_name(memory_mb):
    """The file name of the kernel for a ``memory_mb`` guest."""
    return f'dirtying-{dirtied_mib(memory_mb)}m.bin'


def write_kernel(directory, memory_mb):
    """Write the kernel for a ``memory_mb`` guest into ``directory``;
    return its path."""
    path = os.path.join(directory, kernel_name(memory_mb))
    with open(path, 'wb') as f:
        f.write(libvirt_hosts.dirtying_kernel(dirtied_mib(memory_mb)))
    return path
