"""Guests with passed-through PCI devices in a live migration.

What each side does (the driver does the hypervisor's part,
numamig.virt.libvirt.hostdev):

* the source's check refuses a guest that holds devices and whose
  flavor (``numamig:device_migration``) or image
  (``numamig_device_migration``) says ``refuse``; the default,
  ``unplug``, lets it move;
* the source, once the destination claimed and before the copy,
  hot-unplugs every device, waiting up to ``[compute]
  device_detach_timeout`` for the guest to release them
  (``SourceDevices.unplug``); a failed or aborted migration plugs them
  back (``SourceDevices.replug``);
* the destination, once the guest arrived, plugs the devices its claim
  holds and reads back, from the hypervisor, whether each is on the host
  node of its guest cell (``plug_claimed``); it records that
  verification with the migration (the records API's
  ``migration_record_devices``, shown by ``numamig-manage migration
  show`` and told as ``instance.devices.verified``).

The claimed devices are (alias, host PCI address, guest cell) triples;
``claimed_placements`` reads them from a move claim (the claim's
``pci_devices`` where the claims record them).
"""

from oslo_log import log as logging
import oslo_messaging as messaging

from numamig import exception
from numamig.compute import events
from numamig.numa import pci
from numamig.objects import migration_satellites

LOG = logging.getLogger(__name__)

# The per-guest choice is read where the conductor's standing
# live-migratable answer reads it too (numa.pci).
FLAVOR_KEY = pci.DEVICE_MIGRATION_FLAVOR_KEY
IMAGE_KEY = pci.DEVICE_MIGRATION_IMAGE_KEY
UNPLUG = pci.UNPLUG
REFUSE = pci.REFUSE
MODES = pci.DEVICE_MIGRATION_MODES
migration_mode = pci.device_migration_mode


def check_source(agent, instance):
    """Refuse, in one line, a guest whose devices may not be unplugged.

    :raises MigrationPreCheckError:
    """
    mode, where = migration_mode(instance)
    if mode != REFUSE:
        return
    held = agent.driver.assigned_devices(instance.uuid)
    if held:
        raise exception.MigrationPreCheckError(
            reason=f"instance {instance.uuid} holds passed-through PCI "
                   f"device(s) {', '.join(held)} and its {where} is "
                   f"'{REFUSE}': it is not migrated (set it to '{UNPLUG}' "
                   f"to hot-unplug them for the move)")


def claimed_placements(claim):
    """[(alias, address, guest cell)] of the devices a move claim holds
    (none where the claim records no device)."""
    if claim is None:
        return []
    devices = getattr(claim, 'pci_devices', None)
    topology = getattr(claim, 'topology', None)
    if devices is None and topology is not None and \
            topology.obj_attr_is_set('pci_devices'):
        # The move claim's placement (numa.pci chose each function on
        # the guest cell's host node).
        devices = topology.pci_devices
    return [(d['alias'], d['address'], int(d['guest_cell']))
            if isinstance(d, dict) else
            (d.alias, d.address, int(d.guest_cell))
            for d in devices or ()]


class SourceDevices:
    """The devices one outgoing migration unplugged, to plug them back."""

    def __init__(self, agent, instance, migration):
        self.agent = agent
        self.instance = instance
        self.migration = migration
        self.detached = []

    def unplug(self):
        """Hot-unplug every device before the copy (none: nothing).

        :raises DeviceDetachFailed: nothing stays unplugged.
        """
        timeout = self.agent.device_detach_timeout
        self.detached = self.agent.driver.detach_devices(
            self.instance.uuid, timeout, on_late=self._late) or []
        if self.detached:
            LOG.info("%s: migration %s: unplugged %s from %s before the "
                     "copy; the destination plugs its claimed devices "
                     "after it", self.agent.host, self.migration.uuid,
                     ', '.join(d['address'] for d in self.detached),
                     self.instance.uuid)

    def _late(self, address, alias, outcome, reason):
        """A device released after the unplug's deadline was plugged
        back, or lost: told to the agent's listeners (its notifier)."""
        self.agent.events.emit(events.DEVICE_LATE_RELEASE,
                               events.DeviceLateRelease(
                                   self.agent.host, self.instance.uuid,
                                   self.migration.uuid, address, alias,
                                   outcome, reason))

    def replug(self):
        """Plug back what ``unplug`` took (the migration failed or was
        aborted before the guest left); asked twice, plugs nothing."""
        if not self.detached:
            return []
        plugged = self.agent.driver.reattach_devices(self.instance.uuid,
                                                     self.detached)
        LOG.info("%s: migration %s rolled back: %s plugged back into %s",
                 self.agent.host, self.migration.uuid,
                 ', '.join(plugged) or 'nothing left to', self.instance.uuid)
        return plugged


def plug_claimed(agent, ctxt, instance, migration, placements):
    """Destination, after the arrival: plug the claimed devices, then
    verify each is plugged and on its guest cell's host node, and record
    that verification with the migration.

    A device that cannot be plugged, or lands on another node, is
    logged as an error and recorded (a WARN notification): the guest
    runs here regardless (undoing a finished migration would cost it
    more). A redelivered arrival plugs nothing new and records the same
    verification, which the conductor keeps once.

    :returns: the verification (driver.verify_device_affinity), one
        dict per placement, with ``ok``.
    """
    if not placements:
        return []
    try:
        agent.driver.attach_devices(instance.uuid, placements)
    except exception.NumamigException as exc:
        LOG.error("%s: migration %s: the claimed devices of %s were not "
                  "plugged: %s", agent.host, migration.uuid, instance.uuid,
                  exc)
    checked = agent.driver.verify_device_affinity(instance.uuid, placements)
    for item in checked:
        item['ok'] = bool(item['present'] and item['local'])
        line = (f"{agent.host}: migration {migration.uuid}: device "
                f"{item['alias']} {item['address']} of guest cell "
                f"{item['guest_cell']} (host nodes {item['cell_nodes']}), "
                f"on node {item['device_node']}")
        if item['ok']:
            LOG.info("%s: plugged, local", line)
        elif not item['present']:
            LOG.error("%s: NOT plugged", line)
        else:
            LOG.error("%s: plugged, NOT local to its guest cell", line)
    _record(agent, ctxt, migration, checked)
    return checked


def _record(agent, ctxt, migration, checked):
    """Cast the verification to the conductor; the arrival does not wait
    on it, nor fail for it (the log above keeps it)."""
    if not checked:
        return
    entries = [migration_satellites.device_entry(item) for item in checked]
    try:
        if not agent.conductor_api.migration_record_devices(
                ctxt, migration.uuid, agent.host, entries):
            LOG.info("%s: migration %s: the conductor cannot record the "
                     "device verification (release 1's API)", agent.host,
                     migration.uuid)
    except messaging.MessagingException as exc:
        LOG.warning("%s: migration %s: the device verification was not "
                    "recorded (the log above keeps it): %s", agent.host,
                    migration.uuid, exc)
