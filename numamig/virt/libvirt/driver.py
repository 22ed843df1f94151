"""LibvirtDriver: the ComputeDriver of a libvirt host (qemu, kvm, test).

One driver manages one host through one connection and the settings it
was built with; it never reads CONF after construction, so several agents
can run side by side in one process. On the libvirt test driver
(``test://`` URIs, the embedded tier) it cannot migrate natively; the
agents then carry the rewritten XML over RPC and this driver defines and
starts it on the destination (``accept_emulated_migration``), labelled as
emulated in logs and results.
"""

import threading
import time

import libvirt
from oslo_log import log as logging

from numamig import exception
from numamig.virt import driver
from numamig.virt.libvirt import errors
from numamig.virt.libvirt import events
from numamig.virt.libvirt import guest_parse
from numamig.virt.libvirt import guest_xml
from numamig.virt.libvirt import host_topology
from numamig.virt.libvirt import migration
from numamig.virt.libvirt import migration_xml
from numamig.virt.libvirt import numa_info

LOG = logging.getLogger(__name__)


def _ignore_libvirt_error(_ctx, _err):
    # libvirt prints every error to stderr by default; numamig raises
    # them as exceptions instead.
    pass


libvirt.registerErrorHandler(_ignore_libvirt_error, None)


class LibvirtDriver(driver.ComputeDriver):
    """ComputeDriver on libvirt-python for one host's LibvirtSettings."""

    def __init__(self, settings):
        self._settings = settings
        self._conn = None
        self._host_topology = None
        self._jobs = {}
        self._jobs_lock = threading.Lock()

    @property
    def supports_native_migration(self):
        return not self._settings.is_test_driver

    @property
    def hypervisor_uri(self):
        return self._settings.uri

    @property
    def hypervisor_type(self):
        return 'test' if self._settings.is_test_driver else \
            self._settings.virt_type

    @property
    def host(self):
        return self._settings.host

    def init_host(self, host):
        """Connect and build the host topology; see ComputeDriver."""
        if host != self._settings.host:
            LOG.warning("init_host(%s) on a driver configured for %s",
                        host, self._settings.host)
        # An agent restarted in the same process (the embedded tier's
        # crash tests) keeps the open connection: every test:// open is
        # a new, empty host, and the guests must survive their agent.
        if self._conn is None or not self._conn.isAlive():
            if not self._settings.is_test_driver:
                # Before the open: only later connections get events, and
                # a migration's downtime arrives as one.
                events.start_event_loop()
            try:
                self._conn = libvirt.open(self._settings.uri)
            except libvirt.libvirtError as exc:
                raise errors.hypervisor_error(
                    exc, self.host, f"connect to {self._settings.uri}")
        caps_text, source = self._capabilities()
        cells = host_topology.parse_capabilities(caps_text, self.host,
                                                 source)
        self._host_topology = host_topology.build_host_topology(
            cells, self._settings)
        LOG.info("Host %s on %s: %d NUMA cells, dedicated pCPUs %s, "
                 "shared pCPUs %s%s", self.host, self._settings.uri,
                 len(cells), sorted(set().union(
                     *(c.pcpuset for c in self._host_topology.cells))),
                 sorted(set().union(
                     *(c.cpuset for c in self._host_topology.cells))),
                 ' (embedded: migrations are emulated)'
                 if self._settings.is_test_driver else '')

    def _capabilities(self):
        path = self._settings.capabilities_file
        if path:
            try:
                with open(path) as f:
                    return f.read(), path
            except OSError as exc:
                raise exception.InvalidConfiguration(
                    option='[libvirt] capabilities_file',
                    reason=f"cannot read {path}: {exc.strerror}")
        try:
            return self._conn.getCapabilities(), 'getCapabilities()'
        except libvirt.libvirtError as exc:
            raise errors.hypervisor_error(exc, self.host,
                                          'report its capabilities')

    def cleanup_host(self):
        """Close the connection (an agent's stop; tests' tear-down)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def get_host_topology(self):
        """Return a copy of the host topology, free of guest usage."""
        if self._host_topology is None:
            raise exception.HypervisorError(
                host=self.host, action='report its topology',
                reason='init_host() has not run')
        return self._host_topology.obj_clone()

    def list_guests(self):
        return {dom.UUIDString(): dom.name()
                for dom in self._connection().listAllDomains()}

    def get_domain_xml(self, instance_uuid, persistent=False):
        flags = libvirt.VIR_DOMAIN_XML_INACTIVE if persistent else 0
        dom = self._lookup(instance_uuid)
        return self._call(dom.XMLDesc, 'read the domain XML of '
                          f'{instance_uuid}', flags)

    def get_guest_topology(self, instance_uuid):
        return guest_parse.parse_guest_topology(
            self.get_domain_xml(instance_uuid))

    def spawn(self, instance, placed_topology, base_xml=None):
        """Define and start a diskless guest with its placement's XML.

        :returns: the domain's live XML.
        :raises MigrationPreCheckError: the placement does not fit this
            host; DomainXMLError: ``base_xml`` is unusable;
            HypervisorError: libvirt refused the guest (nothing is left
            defined).
        """
        info = None
        if placed_topology is not None and placed_topology.cells:
            info = self.build_migrate_info(placed_topology,
                                           self.get_host_topology())
        domain_type = 'test' if self._settings.is_test_driver else \
            self._settings.virt_type
        xml = guest_xml.build_domain_xml(instance, placed_topology, info,
                                         domain_type, base_xml)
        dom = self._define_and_start(xml, instance.uuid, 'spawn')
        return dom.XMLDesc(0)

    def destroy(self, instance_uuid):
        try:
            dom = self._connection().lookupByUUIDString(instance_uuid)
        except libvirt.libvirtError as exc:
            if errors.is_missing_domain(exc):
                return
            raise errors.hypervisor_error(exc, self.host,
                                          f"look up {instance_uuid}")
        try:
            if dom.isActive():
                dom.destroy()
            if dom.isPersistent():
                dom.undefine()
        except libvirt.libvirtError as exc:
            if not errors.is_missing_domain(exc):
                raise errors.hypervisor_error(exc, self.host,
                                              f"destroy {instance_uuid}")
        LOG.info("Destroyed guest %s on %s", instance_uuid, self.host)

    def power_cycle(self, instance_uuid):
        """Stop a guest and start it again from its persistent definition.

        A restart shows whether what a migration wrote is what the guest
        keeps (the persistent XML), not only what it runs with now.
        """
        dom = self._lookup(instance_uuid)
        action = f"restart {instance_uuid}"
        if self._call(dom.isActive, action):
            self._call(dom.destroy, action)
        self._call(dom.create, action)
        LOG.info("Restarted guest %s on %s", instance_uuid, self.host)

    def build_migrate_info(self, new_topology, host_topology):
        return numa_info.build_migrate_info(
            new_topology, host_topology, self._settings.realtime_priority,
            self.host)

    def migration_target(self):
        """Return (dest_connect_uri, migration_uri) of this host."""
        if self._settings.is_test_driver:
            return self._settings.uri, None
        mig = self._settings.migration
        addr = mig.inbound_addr or self.host
        if ':' in addr:
            addr = f'[{addr}]'
        port = f':{mig.libvirtd_port}' if mig.libvirtd_port else ''
        return (f'qemu+{mig.scheme}://{addr}{port}/system',
                f'tcp://{addr}')

    def get_destination_xml(self, instance_uuid, numa_info):
        dom = self._lookup(instance_uuid)
        flags = 0 if self._settings.is_test_driver else \
            libvirt.VIR_DOMAIN_XML_MIGRATABLE
        xml = self._call(dom.XMLDesc, f"read the XML of {instance_uuid}",
                         flags)
        if numa_info is None:
            return xml
        return migration_xml.get_updated_xml(xml, numa_info)

    def live_migrate(self, instance_uuid, dest_xml, migrate_data,
                     progress_callback=None):
        """Migrate natively to ``migrate_data``'s destination; see base."""
        if self._settings.is_test_driver:
            raise exception.MigrationNotSupported(
                host=self.host, uri=self._settings.uri,
                action='live-migrate natively',
                reason='the libvirt test driver cannot migrate; the agents '
                       'must emulate it (accept_emulated_migration)')
        dom = self._lookup(instance_uuid)
        job = migration.MigrationJob(dom, self._settings.migration,
                                     self.host, migrate_data.dest_host,
                                     progress_callback)
        with self._jobs_lock:
            self._jobs[instance_uuid] = job
        try:
            return job.run(migrate_data.dest_connect_uri, dest_xml,
                           migrate_data.migration_uri,
                           migrate_data.get('bandwidth_mib') or None)
        finally:
            with self._jobs_lock:
                self._jobs.pop(instance_uuid, None)

    def live_migration_abort(self, instance_uuid):
        job = self._job(instance_uuid, 'abort')
        try:
            job.abort()
        except libvirt.libvirtError as exc:
            raise self._job_error(exc, instance_uuid, 'abort')

    def live_migration_force_complete(self, instance_uuid):
        job = self._job(instance_uuid, 'force to complete')
        try:
            job.force_complete()
        except libvirt.libvirtError as exc:
            raise self._job_error(exc, instance_uuid, 'force to complete')

    def accept_emulated_migration(self, instance_uuid, dest_xml):
        """Define and start the rewritten XML here (test driver only)."""
        if not self._settings.is_test_driver:
            raise exception.MigrationNotSupported(
                host=self.host, uri=self._settings.uri,
                action='accept an emulated migration',
                reason='only libvirt test driver hosts emulate migration; '
                       'this host migrates natively')
        doc = migration_xml.parse_domain(dest_xml)
        if doc.findtext('uuid') != instance_uuid:
            raise exception.DomainXMLError(
                domain=migration_xml.domain_name(doc),
                reason=f"its uuid {doc.findtext('uuid')} is not the "
                       f"migrating instance {instance_uuid}")
        started = time.monotonic()
        self._define_and_start(dest_xml, instance_uuid,
                               'accept an emulated migration of')
        elapsed_ms = int((time.monotonic() - started) * 1000)
        LOG.info("Emulated migration: defined and started %s on %s "
                 "(libvirt test driver) in %d ms", instance_uuid, self.host,
                 elapsed_ms)
        return driver.MigrationResult(emulated=True, elapsed_ms=elapsed_ms,
                                      downtime_ms=None)

    def _define_and_start(self, xml, instance_uuid, action):
        conn = self._connection()
        try:
            dom = conn.defineXML(xml)
        except libvirt.libvirtError as exc:
            raise errors.hypervisor_error(exc, self.host,
                                          f"{action} {instance_uuid}")
        try:
            dom.create()
        except libvirt.libvirtError as exc:
            dom.undefine()
            raise errors.hypervisor_error(exc, self.host,
                                          f"{action} {instance_uuid}")
        return dom

    def _connection(self):
        if self._conn is None:
            raise exception.HypervisorError(
                host=self.host, action='reach libvirt',
                reason='init_host() has not run')
        return self._conn

    def _lookup(self, instance_uuid):
        try:
            return self._connection().lookupByUUIDString(instance_uuid)
        except libvirt.libvirtError as exc:
            if errors.is_missing_domain(exc):
                raise exception.InstanceNotFound(instance_uuid=instance_uuid)
            raise errors.hypervisor_error(exc, self.host,
                                          f"look up {instance_uuid}")

    def _call(self, func, action, *args):
        try:
            return func(*args)
        except libvirt.libvirtError as exc:
            raise errors.hypervisor_error(exc, self.host, action)

    def _job(self, instance_uuid, action):
        with self._jobs_lock:
            job = self._jobs.get(instance_uuid)
        if job is None:
            raise exception.NoRunningMigration(
                instance=instance_uuid, host=self.host, action=action,
                reason='no migration started by this driver')
        return job

    def _job_error(self, exc, instance_uuid, action):
        if errors.is_no_job(exc):
            return exception.NoRunningMigration(
                instance=instance_uuid, host=self.host, action=action,
                reason=exc.get_error_message())
        return errors.hypervisor_error(exc, self.host,
                                       f"{action} migration of "
                                       f"{instance_uuid}")
