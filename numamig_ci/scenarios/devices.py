"""A guest with a passed-through PCI device live-migrates (issue 41).

Two nested machines (one host each), each with KVM inside and two
e1000e behind a PCIe expander bridge on node 1 (Layout.devices), their
agents configured with ``[pci] device_spec`` of those functions and the
alias ``nested-nic`` (NUMA affinity required). A guest created with
``pci_passthrough:alias`` gets its claim's function on node 1 and boots
a real Linux kernel (PCI hot-plug built in) holding it as a managed
``<hostdev>``; its init prints its PCI bus every second.

vf-move is the same with SR-IOV virtual functions (Layout.vfs: an igb,
82576, whose VFs the machine's kernel creates): the alias asks for
type-VF, the allow-list admits PFs and VFs, and each function the guest
holds must be a VF (sysfs ``physfn``) whose PF stays bound to igb, no
guest holding a PF.

Nothing numamig records is trusted for the verdict. Read instead:

* the inner libvirtd's live XML of each host (``virsh dumpxml`` inside
  the machine): which host PCI functions the guest holds;
* the machines' kernels (sysfs): each function's ``numa_node`` and the
  driver it is bound to (``vfio-pci`` while a guest holds it);
* the guest kernel's own PCI bus, from its console.

First an aborted migration: the copy capped at 1 MiB/s (libvirt's
``migrateSetMaxSpeed`` on the source, outside numamig), aborted once
QEMU has sent memory; the source's function must be out of the guest
(live XML, guest bus) while the copy runs and back after the abort.
Then the move: the source's live XML loses the guest, the destination's
holds the function the destination's claim chose (its own address, on
node 1, bound to vfio-pci), and the guest's bus showed the device gone
on the source and back on the destination.
"""

import re
import time

import libvirt
from lxml import etree

from numamig.objects import fields
from numamig.virt.libvirt import hostdev_xml
from numamig_ci import slow_copy
from numamig_ci.nested import deployment as nested_deployment
from numamig_ci.nested import vm as nested_vm
from numamig_ci.scenarios.registry import scenario
from numamig_ci.session import DEDICATED

STATUS = fields.MigrationStatus
MEMORY_MB = 256
SPECS = dict(DEDICATED, **{
    'pci_passthrough:alias': f'{nested_deployment.PCI_ALIAS}:1',
    'hw:pci_numa_affinity_policy': 'required'})
DEVICE_IDS = f'{nested_vm.DEVICE_VENDOR_ID}:{nested_vm.DEVICE_PRODUCT_ID}'
VF_IDS = f'{nested_vm.DEVICE_VENDOR_ID}:{nested_vm.VF_PRODUCT_ID}'
# The guest's init prints its first line 10-16 s after create under KVM
# in the nested machine (virtio-mem's figures); libvirt's create itself
# reads the kernel over 9p (15-48 s).
BOOT_S = 600
# How long the guest's bus may take to show a change numamig says is
# done (one line a second).
CONSOLE_S = 120
# The abort's copy cap (MiB/s): the guest's kernel and initrd are ~80
# MiB of non-zero pages, a minute and more to send; then no cap.
CAP_MIB = 1
UNCAPPED_MIB = 1 << 20
_PCI_LINE = re.compile(r'^PCI((?: \S+=[0-9a-f]{4}:[0-9a-f]{4})*)\s*$',
                       re.MULTILINE)


@scenario('device-move',
          "A guest holding a passed-through PCI function on node 1 of a "
          "host (a real guest kernel, NUMA affinity required) live-"
          "migrates to a host of its own such function on node 1: the "
          "source unplugs it before the copy, the destination plugs its "
          "own after; an aborted migration plugs the source's back. Read "
          "from both hosts' libvirt live XML, the machines' sysfs and the "
          "guest kernel's PCI bus.",
          requires=('pci_devices', 'guest_kernel'))
def device_move(s):
    # On machines with VFs (Layout.vfs) the alias asks for those.
    src, _dst = s.pair()
    layout = s.backend.deployment.libvirt[src].machine.layout
    _move(s, f'{nested_vm.DEVICE_VENDOR_ID}:{layout.assigned_product_id}')


@scenario('vf-move',
          "device-move with SR-IOV virtual functions: each host's igb "
          "(82576) on node 1 has VFs; a guest asking for a type-VF alias "
          "gets a VF, never a PF (the allow-list admits both), migrates "
          "and lands holding a VF of the destination's PF on node 1, "
          "every PF left bound to its host driver. Read from both hosts' "
          "libvirt live XML, the machines' sysfs (physfn links) and the "
          "guest kernel's PCI bus.",
          requires=('pci_vfs', 'guest_kernel'))
def vf_move(s):
    _move(s, VF_IDS)


def _move(s, ids):
    """device-move for the functions of vendor:product ``ids``; with
    VF_IDS each function the guest holds is checked to be a VF (sysfs
    physfn) whose PF stays its host's."""
    src, dst = s.pair()
    started = time.monotonic()
    for host in (src, dst):
        _say_functions(s, host, ids)
    found = boot_holding_a_function(s, src, ids, 'dev')
    if found is None:
        return
    guest, source_fn, console, create_s, (bus, boot_s) = found
    slot = guest_slot(bus, ids)
    s.say(f"guest kernel booted on {src} holding {source_fn} "
          f"(create {create_s:.1f} s, bus {boot_s:.1f} s later): guest "
          f"slot {slot}")
    check_host(s, guest, src, source_fn, 'at boot')
    if ids == VF_IDS:
        check_vf(s, guest, src, source_fn, 'at boot')

    if not _aborted(s, guest, src, dst, source_fn, console, ids):
        return

    moved_at = time.monotonic()
    migration = s.migrate(guest, dst)
    if not s.expect_status(migration, guest, STATUS.COMPLETED):
        return
    move_s = time.monotonic() - moved_at
    held = recorded_functions(s.record(guest))
    s.say(f"numamig's record after the move: {held} on {dst}")
    if guest.uuid in s.backend.guests(src):
        s.fail(guest, src, 'source libvirt domains', 'the guest gone',
               'still defined')
    # The source records the move completed; the destination plugs its
    # function in its own post-migration step, which may end later.
    # Both machines are alike: the destination's function may have the
    # source's address; it is another machine's (its sysfs below).
    there = wait_functions(s, guest, dst, lambda found: bool(found))
    if len(there) != 1:
        s.fail(guest, dst, 'destination live <hostdev> sources',
               "one function of the destination's own", there)
    elif there != held:
        s.fail(guest, dst, "destination live <hostdev> sources",
               f"the destination claim's {held}", there)
    if there:
        check_host(s, guest, dst, there[0], 'after the move')
        if ids == VF_IDS:
            check_vf(s, guest, dst, there[0], 'after the move')
        # Plugged persistently too: its next start there holds it.
        name = s.backend.guests(dst)[guest.uuid]
        kept = functions_of(s.backend.agent_of(dst).dumpxml(dst, name, True))
        if kept != there:
            s.fail(guest, dst, 'destination persistent <hostdev> sources',
                   there, kept)
    # The source's function is the source machine's again.
    driver = s.backend.pci_devices(src).get(source_fn, {}).get('driver')
    s.say(f"{src}: {source_fn} bound to {driver or 'no driver'} after the "
          f"guest left")
    if driver == 'vfio-pci':
        s.fail(guest, src, f"sysfs driver of {source_fn} after the move",
               'not vfio-pci (libvirt gave it back)', driver)
    # The guest's own bus: gone on the source before the copy, present
    # again on the destination (its console now written there).
    # The source's last lines (the guest ran there until the switch)
    # lack the device: the abort's re-plug came back, the move's unplug
    # took it again before the copy.
    buses = bus_lines(_read(console))
    gone = bool(buses) and ids not in buses[-1].values()
    arrived = wait_bus(s.backend.console_in(dst, console), CONSOLE_S,
                       lambda bus: ids in bus.values())
    s.say(f"guest PCI bus: device gone on {src} before the copy: "
          f"{'yes' if gone else 'NO'}; on {dst}: "
          f"{guest_slot(arrived[0], ids) if arrived else 'NOT seen'}")
    if not gone:
        s.fail(guest, src, 'guest kernel PCI bus during the move',
               f"a line without {ids} (the unplug)", buses[-3:])
    if arrived is None:
        s.fail(guest, dst, 'guest kernel PCI bus on the destination',
               f"{ids} within {CONSOLE_S} s",
               _tail(s.backend.console_in(dst, console)))
    elif guest_slot(arrived[0], ids) != slot:
        s.fail(guest, dst, 'guest PCI slot of the plugged device',
               slot, guest_slot(arrived[0], ids))
    s.say(f"device move: {time.monotonic() - started:.0f} s in all "
          f"(the move {move_s:.1f} s)")


def _aborted(s, guest, src, dst, source_fn, console, ids):
    """An aborted migration: the function out of the guest while the
    copy runs, back after the abort. Return whether the move may go on
    (the guest runs on the source with its copy uncapped)."""
    _set_speed(s, src, guest, CAP_MIB)
    try:
        migration = s.api.live_migrate_instance(s.ctxt, guest.uuid, dst)
        record = slow_copy.wait_until(s.api, s.ctxt, migration,
                                      slow_copy.COPYING,
                                      s.backend.migration_timeout_s)
        if not slow_copy.reached(record, slow_copy.COPYING):
            s.fail(guest, src, 'migration while copying', 'running, memory '
                   'sent', f"{record.status}: {record.error or ''}"[:400])
            return False
        during = live_functions(s, guest, src)
        unplugged = wait_bus(console, CONSOLE_S,
                             lambda bus: ids not in bus.values())
        s.say(f"while copying ({record.memory_processed} bytes sent): "
              f"{src} live <hostdev> {during}; guest bus without the "
              f"device: {'yes' if unplugged else 'NO'}")
        if during:
            s.fail(guest, src, 'source live <hostdev> while copying',
                   '[] (unplugged before the copy)', during)
        if unplugged is None:
            s.fail(guest, src, 'guest kernel PCI bus while copying',
                   f"no {ids}", _tail(console))
        s.api.migration_abort(s.ctxt, migration.uuid)
        migration = s.wait(migration.uuid)
    finally:
        _set_speed(s, src, guest, UNCAPPED_MIB)
    s.say(f"aborted migration of {guest.name}: {migration.status}")
    if not s.expect_status(migration, guest, STATUS.CANCELLED):
        return False
    # The source plugs it back before the destination drops its claim.
    back = wait_functions(s, guest, src, lambda found: found == [source_fn])
    replugged = wait_bus(console, CONSOLE_S,
                         lambda bus: ids in bus.values())
    s.say(f"after the abort: {src} live <hostdev> {back}; guest bus "
          f"{'holds' if replugged else 'LACKS'} the device")
    if back != [source_fn]:
        s.fail(guest, src, 'source live <hostdev> after the abort',
               [source_fn], back)
        return False
    if replugged is None:
        s.fail(guest, src, 'guest kernel PCI bus after the abort',
               ids, _tail(console))
        return False
    check_host(s, guest, src, source_fn, 'after the abort')
    return True


def _set_speed(s, host, guest, mib):
    conn = libvirt.open(s.backend.libvirt_uri(host))
    try:
        conn.lookupByUUIDString(guest.uuid).migrateSetMaxSpeed(mib, 0)
    finally:
        conn.close()


def _say_functions(s, host, ids):
    functions = {address: entry for address, entry
                 in s.backend.pci_devices(host).items()
                 if f"{entry['vendor'][2:]}:{entry['device'][2:]}" == ids}
    s.say(f"{host}: assignable functions (sysfs) " + ', '.join(
        f"{a} node {e['numa_node']} group {e['iommu_group'] or '-'} "
        f"driver {e['driver'] or '-'}" for a, e in sorted(functions.items())))


def check_host(s, guest, host, address, when):
    """The function at ``address`` is on the guest's node and bound to
    vfio-pci, as ``host``'s machine's kernel says."""
    entry = s.backend.pci_devices(host).get(address)
    node = s.backend.deployment.libvirt[host].machine.layout.pci_node
    actual = None if entry is None else (entry['numa_node'], entry['driver'])
    s.say(f"{host} sysfs {when}: {address} numa_node, driver = {actual}")
    if actual != (str(node), 'vfio-pci'):
        s.fail(guest, host, f"sysfs {address} (numa_node, driver) {when}",
               (str(node), 'vfio-pci'), actual)


def check_vf(s, guest, host, address, when):
    """The function at ``address`` is a VF (sysfs physfn) whose PF is
    still bound to its host driver (not vfio-pci, in no guest), and no
    guest on ``host`` holds a PF, as ``host``'s machine's kernel and
    libvirt say."""
    functions = s.backend.pci_devices(host)
    pf = functions.get(address, {}).get('physfn', '')
    pf_driver = functions.get(pf, {}).get('driver')
    s.say(f"{host} sysfs {when}: {address} physfn {pf or '-'} (driver "
          f"{pf_driver or '-'})")
    if not pf:
        s.fail(guest, host, f"sysfs {address}/physfn {when}",
               'a PF (the function a VF)', functions.get(address))
    elif pf_driver in (None, '', 'vfio-pci'):
        s.fail(guest, host, f"sysfs driver of PF {pf} {when}",
               'its host driver (igb)', pf_driver or 'none')
    pfs = {a for a, e in functions.items()
           if e.get('device', '')[2:] == nested_vm.PF_PRODUCT_ID}
    agent = s.backend.agent_of(host)
    for name in s.backend.guests(host).values():
        given = set(functions_of(agent.dumpxml(host, name))) & pfs
        if given:
            s.fail(guest, host, f"live <hostdev> of {name} {when}",
                   'no PF (no guest asked type-PF)', sorted(given))


def boot_holding_a_function(s, host, ids, label):
    """Create a one-cell guest asking one function of vendor:product
    ``ids`` on ``host`` and boot its kernel holding the function its
    claim chose: (guest, function, console, create seconds, (bus, boot
    seconds)), or None once the failure is recorded."""
    guest = s.create(host, 1, memory_mb=MEMORY_MB, specs=dict(SPECS),
                     label=label)
    held = recorded_functions(s.record(guest))
    s.say(f"numamig's claim on {host}: {held}")
    if len(held) != 1:
        s.fail(guest, host, 'record numa_topology.pci_devices',
               'one function', held)
        return None
    function = held[0]
    console, create_s = s.backend.boot_guest_kernel(host, guest,
                                                    hostdevs=[function])
    booted = wait_bus(console, BOOT_S, lambda bus: ids in bus.values())
    if booted is None:
        s.fail(guest, host, 'guest kernel PCI bus (console PCI lines)',
               f"a {ids} function within {BOOT_S} s", _tail(console))
        return None
    return guest, function, console, create_s, booted


def recorded_functions(record):
    topology = record.numa_topology
    if topology is None or not topology.obj_attr_is_set('pci_devices'):
        return []
    return [d.address for d in topology.pci_devices]


def live_functions(s, guest, host):
    """The host PCI addresses of the guest's live ``<hostdev>`` on
    ``host`` (virsh inside the machine)."""
    name = s.backend.guests(host).get(guest.uuid)
    if name is None:
        return None
    xml = s.backend.agent_of(host).dumpxml(host, name)
    return functions_of(xml)


def wait_functions(s, guest, host, done, timeout=CONSOLE_S):
    """``live_functions`` once ``done`` holds for them, or as they are
    after ``timeout`` s ([] where the guest is not there)."""
    deadline = time.monotonic() + timeout
    while True:
        found = live_functions(s, guest, host) or []
        if done(found) or time.monotonic() > deadline:
            return found
        time.sleep(1)


def functions_of(xml):
    """The host PCI addresses a domain XML's devices name."""
    doc = etree.fromstring(xml.encode())
    return [d.address for d in hostdev_xml.assigned_devices(doc)]


def bus_lines(text):
    """[{guest PCI address: 'vendor:device'}] of each complete PCI line
    the guest printed."""
    complete = text[:text.rfind('\n') + 1]
    return [dict(pair.split('=') for pair in match.split())
            for match in _PCI_LINE.findall(complete)]


def guest_slot(bus, ids=DEVICE_IDS):
    """The guest PCI address of the function of vendor:product ``ids``
    on ``bus`` (None without)."""
    return next((a for a, found in sorted(bus.items()) if found == ids),
                None)


def wait_bus(console, timeout, done):
    """(the last bus, seconds) once ``done`` holds for the last PCI line
    of ``console``, or None after ``timeout`` s."""
    started = time.monotonic()
    while True:
        lines = bus_lines(_read(console))
        if lines and done(lines[-1]):
            return lines[-1], time.monotonic() - started
        if time.monotonic() - started > timeout:
            return None
        time.sleep(0.5)


def _read(console):
    try:
        with open(console, errors='replace') as f:
            return f.read()
    except OSError:
        return ''


def _tail(console):
    return _read(console)[-300:] or '(empty)'
