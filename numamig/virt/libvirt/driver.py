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
from lxml import etree
from oslo_log import log as logging

from numamig import cpumodel
from numamig import exception
from numamig.numa import distance
from numamig.numa import locality as numa_locality
from numamig.virt import driver
from numamig.virt.libvirt import cpu
from numamig.virt.libvirt import dirty_rate
from numamig.virt.libvirt import emulated_copy
from numamig.virt.libvirt import errors
from numamig.virt.libvirt import events
from numamig.virt.libvirt import guard
from numamig.virt.libvirt import guard_claims
from numamig.virt.libvirt import guard_install
from numamig.virt.libvirt import guest_parse
from numamig.virt.libvirt import guest_xml
from numamig.virt.libvirt import host_topology
from numamig.virt.libvirt import hostdev
from numamig.virt.libvirt import hostdev_xml
from numamig.virt.libvirt import incoming_threads
from numamig.virt.libvirt import locality
from numamig.virt.libvirt import memory_resize
from numamig.virt.libvirt import migration
from numamig.virt.libvirt import migration_threads
from numamig.virt.libvirt import migration_xml
from numamig.virt.libvirt import nodedev
from numamig.virt.libvirt import numa_info
from numamig.virt.libvirt import postcopy

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
        self._host_cpu = None
        self._jobs = {}
        self._jobs_lock = threading.Lock()
        # The guard's hook is in place, and its claims file was written
        # by the last publication.
        self._hook_installed = self._claims_published = False
        # Serialises the claims file's writers (claim changes, refresh).
        self._claims_lock = threading.Lock()

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
            cells, self._settings, self._pci_devices(cells))
        self._log_distances(cells)
        self._host_cpu = self._read_host_cpu(caps_text)
        LOG.info("Host %s on %s: %d NUMA cells, dedicated pCPUs %s, "
                 "shared pCPUs %s%s", self.host, self._settings.uri,
                 len(cells), sorted(set().union(
                     *(c.pcpuset for c in self._host_topology.cells))),
                 sorted(set().union(
                     *(c.cpuset for c in self._host_topology.cells))),
                 ' (embedded: migrations are emulated)'
                 if self._settings.is_test_driver else '')
        self._install_guard()

    def _pci_devices(self, cells):
        """The host's assignable PCI functions ([pci] device_spec), read
        from libvirt's node devices once at start."""
        if not self._settings.pci_device_spec:
            return []
        try:
            texts = [dev.XMLDesc(0) for dev in self._conn.listAllDevices(
                libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV)]
        except libvirt.libvirtError as exc:
            raise errors.hypervisor_error(exc, self.host,
                                          "list PCI node devices")
        devices = nodedev.assignable_devices(
            texts, self._settings.pci_device_spec,
            {cell.id for cell in cells}, self.host)
        LOG.info("Host %s: %d assignable PCI functions of %d listed "
                 "([pci] device_spec): %s", self.host, len(devices),
                 len(texts), ', '.join(
                     f"{d.address} ({d.vendor_id}:{d.product_id} "
                     f"{d.dev_type}, node {d.numa_node})"
                     for d in devices) or 'none')
        return devices

    # -- the destination-side migration guard --------------------------------

    def _install_guard(self):
        """Install the guard's hook (real hosts) and publish no claims yet.

        A test-driver host has no libvirtd to run a hook: its emulated
        migrations call the guard's decision themselves.
        """
        settings = self._settings.migration_guard
        if settings is None:
            return
        state = guard_install.ON
        if not self._settings.is_test_driver:
            state, _changed = guard_install.install(settings, self.host)
        self._hook_installed = state == guard_install.ON
        self.publish_move_claims({})

    def migration_guard_state(self):
        if self._settings.migration_guard is None:
            return guard_install.OFF
        if self._hook_installed and self._claims_published:
            return guard_install.ON
        return guard_install.FAILED

    def read_guard_log(self, position=None):
        """See ComputeDriver: the guard's log ([libvirt]
        migration_guard_log_file), when the guard is on and has one."""
        settings = self._settings.migration_guard
        if settings is None or not settings.log_file:
            return [], None
        try:
            return guard.read_log(settings.log_file, position)
        except OSError as exc:
            raise exception.HypervisorError(
                host=self.host, action="read the migration guard's log",
                reason=f"{settings.log_file}: {exc.strerror or exc}")

    def migration_guard_refresh_s(self):
        settings = self._settings.migration_guard
        # A third of the age at which the guard calls the file stale:
        # two refreshes may be late before a live agent looks dead.
        return None if settings is None else settings.max_age_s / 3

    def publish_move_claims(self, claims):
        """Write every claim's placement to the guard's claims file; see
        ComputeDriver. A write that fails is logged and the guard reported
        failed (the hook then finds the file stale)."""
        settings = self._settings.migration_guard
        if settings is None:
            return
        host_topology = self.get_host_topology()
        placements = {
            uuid: guard_claims.ClaimPlacement.from_info(
                migration, self.build_migrate_info(topology, host_topology))
            for uuid, (migration, topology) in claims.items()}
        with self._claims_lock:
            try:
                guard_claims.write(settings.claims_file, self.host,
                                   placements)
            except OSError as exc:
                LOG.error("%s: cannot publish the move claims to the "
                          "migration guard (%s): %s; incoming migrations "
                          "are not guarded until it works", self.host,
                          settings.claims_file, exc.strerror or exc)
                self._claims_published = False
                return
            self._claims_published = True

    def check_arrival(self, instance_uuid, migration_uuid, topology):
        """See ComputeDriver. The live XML is compared with the claim as
        the guard compares an incoming one; a persistent definition that
        differs from the claim is defined anew from the claim (libvirt's
        migrate hook filters only the live XML)."""
        info = self.build_migrate_info(topology, self.get_host_topology())
        placement = guard_claims.ClaimPlacement.from_info(migration_uuid,
                                                          info)
        live = migration_xml.parse_domain(self.get_domain_xml(instance_uuid))
        # The live XML keeps the distances the guest runs with (guest
        # ABI); the persistent one below is held to the claim's.
        verdict = guard.against_claim(live, instance_uuid, self.host,
                                      placement, live=True)
        if verdict.action != guard.UNCHANGED:
            return verdict.describe()
        persistent = self.get_domain_xml(instance_uuid, persistent=True)
        doc = migration_xml.parse_domain(persistent)
        if guard.against_claim(doc, instance_uuid, self.host,
                               placement).action == guard.REWRITTEN:
            self._call(self._connection().defineXML,
                       f"define the claimed placement of {instance_uuid}",
                       migration_xml.get_updated_xml(persistent, info))
            LOG.info("%s: persistent definition of %s rewritten to the "
                     "claim of migration %s (the migration guard changed "
                     "only its live XML)", self.host, instance_uuid,
                     migration_uuid)
        return None

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

    def _log_distances(self, cells):
        """Say once (at start, and when the table changed) that libvirt
        gives no NUMA distance table, or an incomplete one: the placement
        then assumes local 10, remote 20 where it lacks an entry, so every
        remote pair is equally far and nothing is placed nearest first."""
        if len(cells) < 2:
            return
        missing = distance.missing(cells)
        if missing:
            LOG.warning(
                "Host %s: libvirt gives %s NUMA distance table (%d of %d "
                "entries missing); numamig assumes local %d, remote %d "
                "where it lacks one, so it places guests as if those nodes "
                "were equally far. Check the firmware's SLIT and <distances> "
                "in virsh capabilities.", self.host,
                'an incomplete' if len(missing) < len(cells) ** 2 else 'no',
                len(missing), len(cells) ** 2, distance.LOCAL,
                distance.REMOTE)

    def refresh_distances(self):
        """Read the NUMA distance table again; see ComputeDriver."""
        if self._host_topology is None:
            return None
        caps_text, source = self._capabilities()
        cells = host_topology.parse_capabilities(caps_text, self.host,
                                                 source)
        table = {cell.id: dict(cell.distances) for cell in cells}
        known = {cell.id: dict(cell.distances)
                 for cell in self._host_topology.cells}
        if table == known or set(table) != set(known):
            # The same table; or other cells, which only a restart (the
            # whole topology read again) may take.
            return None
        LOG.info("Host %s: the NUMA distance table changed from %s to %s; "
                 "reporting it", self.host, known, table)
        for cell in self._host_topology.cells:
            cell.distances = table[cell.id]
        self._log_distances(cells)
        return self._host_topology.obj_clone()

    def _read_host_cpu(self, caps_text):
        """The HostCPU of this host; domain capabilities where the
        hypervisor has them (not libvirt's test driver)."""
        domcaps = None
        try:
            domcaps = self._conn.getDomainCapabilities(
                None, None, None, self._virt_type())
        except libvirt.libvirtError as exc:
            if exc.get_error_code() != libvirt.VIR_ERR_NO_SUPPORT:
                LOG.warning("%s: no domain capabilities (%s): the CPU "
                            "checks judge by the host CPU alone",
                            self.host, exc)
        try:
            return cpu.host_cpu(caps_text, domcaps)
        except etree.XMLSyntaxError as exc:
            LOG.warning("%s: CPU not reported: %s", self.host, exc)
            return None

    def host_cpu(self):
        return self._host_cpu

    def _virt_type(self):
        """The domain type the CPU questions are asked for (None on the
        test driver, which answers none of them)."""
        return None if self._settings.is_test_driver else \
            self._settings.virt_type

    def guest_cpu(self, instance_uuid):
        dom = self._lookup(instance_uuid)
        # The migratable XML: host-model expanded to what the guest runs.
        text = self._call(dom.XMLDesc,
                          f'read the domain XML of {instance_uuid}',
                          libvirt.VIR_DOMAIN_XML_MIGRATABLE)
        return cpu.guest_cpu(text, self._host_cpu)

    def compare_guest_cpu(self, guest):
        """The reported CPU's certain refusals first (host-passthrough
        needs the same model, which libvirt's comparison, a superset
        check, would not refuse), then libvirt's comparison where the
        hypervisor has one. A certain refusal that cannot name the
        missing features (a model not usable here, for which libvirt's
        domain capabilities list no blockers: seen on a KVM host of an
        older CPU generation) asks libvirt too and names the features
        its comparison names."""
        known = super().compare_guest_cpu(guest)
        if known.refused and known.missing:
            return known
        answer = cpu.compare(self._connection(), guest,
                             self._host_cpu.arch if self._host_cpu else None,
                             self._virt_type())
        if known.refused:
            if answer is not None and answer.refused and answer.missing:
                return cpumodel.Compatibility(
                    False, f"{known.reason}: {answer.reason}",
                    answer.missing)
            return known
        return known if answer is None else answer

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

    def postcopy_paused(self, instance_uuid):
        try:
            return postcopy.broken(self._lookup(instance_uuid))
        except exception.NotFound:
            return False

    def resize_virtio_mem(self, instance_uuid, requested_mb, deadline_s):
        """Set the requested size of a running guest's virtio-mem devices
        ({guest cell: MiB}) and wait up to ``deadline_s`` for the guest.

        :returns: ({guest cell: current MiB}, reached).
        :raises InstanceNotFound, HypervisorError: see memory_resize.
        """
        return memory_resize.resize(self._lookup(instance_uuid),
                                    requested_mb, deadline_s, self.host)

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
        return migration_xml.get_migration_xml(xml, numa_info)

    def select_migration_policy(self, requested=None, flavor=None,
                                image=None):
        """See ComputeDriver: from this host's [libvirt] policies."""
        return self._settings.migration.select_policy(requested, flavor,
                                                      image)

    def live_migrate(self, instance_uuid, dest_xml, migrate_data,
                     progress_callback=None, policy=None,
                     recovery_callback=None, abort_requested=None,
                     threads=None, action_callback=None):
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
                                     progress_callback, policy=policy,
                                     recovery_callback=recovery_callback,
                                     abort_requested=abort_requested,
                                     threads=threads,
                                     action_callback=action_callback)
        live_xml = self._running_distances(dom, instance_uuid, dest_xml)
        with self._jobs_lock:
            self._jobs[instance_uuid] = job
        try:
            return job.run(migrate_data.dest_connect_uri, dest_xml,
                           migrate_data.migration_uri,
                           migrate_data.get('bandwidth_mib') or None,
                           live_xml=live_xml)
        finally:
            with self._jobs_lock:
                self._jobs.pop(instance_uuid, None)

    def migration_housekeeping_cpus(self):
        return self._settings.migration.thread_cpus

    def watch_incoming_migration(self, instance_uuid, chosen, memory_mb,
                                 on_end):
        """See base; test-driver hosts run no QEMU to watch."""
        if self._settings.is_test_driver:
            return None
        settings = self._settings.migration
        return incoming_threads.IncomingWatch(
            instance_uuid, self.host, chosen, settings.progress_interval_s,
            incoming_threads.time_limit(settings, memory_mb),
            on_end).start()

    def _running_distances(self, dom, instance_uuid, dest_xml):
        """DEST_XML for ``dest_xml``: the guest's cells' distances as it
        runs with them (libvirt refuses others: guest ABI), the
        destination's staying in ``dest_xml``, the PERSIST_XML, for the
        guest's next start there."""
        running = self._call(dom.XMLDesc, f"read the XML of {instance_uuid}",
                             libvirt.VIR_DOMAIN_XML_MIGRATABLE)
        live = migration_xml.with_running_distances(dest_xml, running)
        if live is not dest_xml:
            LOG.info("%s: %s keeps the NUMA distances it runs with until "
                     "it is next started; its persistent definition on "
                     "the destination carries the destination's",
                     self.host, instance_uuid)
        return live

    def resume_postcopy(self, instance_uuid, target, history, policy=None,
                        progress_callback=None, recovery_callback=None,
                        reason='resume requested'):
        """Resume a postcopy-paused migration; see base."""
        if self._settings.is_test_driver:
            raise exception.MigrationNotSupported(
                host=self.host, uri=self._settings.uri,
                action='resume a post-copy migration',
                reason='the libvirt test driver cannot migrate')
        dom = self._lookup(instance_uuid)
        job = migration.MigrationJob(dom, self._settings.migration,
                                     self.host, target['dest_host'],
                                     progress_callback, policy=policy,
                                     recovery_callback=recovery_callback)
        with self._jobs_lock:
            self._jobs[instance_uuid] = job
        try:
            return job.resume(target['dest_connect_uri'], target['xml'],
                              target.get('migration_uri'), history, reason)
        finally:
            with self._jobs_lock:
                self._jobs.pop(instance_uuid, None)

    def emulate_copy(self, instance_uuid, policy, progress_callback=None,
                     action_callback=None):
        """See ComputeDriver: test-driver hosts with [libvirt]
        emulated_migration_bandwidth set model the copy."""
        if not self._settings.is_test_driver:
            return None
        dom = self._lookup(instance_uuid)
        memory_kib = self._call(dom.info, f"read the memory of "
                                          f"{instance_uuid}")[1]
        return emulated_copy.run(self._settings.migration, self.host,
                                 instance_uuid, memory_kib, policy,
                                 progress_callback, action_callback)

    def predict_convergence(self, instance_uuid, policy):
        """See ComputeDriver. A test-driver host cannot measure; with a
        modelled pre-copy its configured dirty rate stands in
        (``emulated``)."""
        dom = self._lookup(instance_uuid)
        memory = self._call(dom.info, f"read the memory of "
                                      f"{instance_uuid}")[1] * 1024
        mig = self._settings.migration
        if self._settings.is_test_driver and mig.emulated_bandwidth_mib:
            rate, method = mig.emulated_dirty_rate_mib * 1024 * 1024, \
                'emulated'
        else:
            rate, method = dirty_rate.sample(
                self._connection(), dom,
                deadline_s=mig.dirty_rate_deadline_s,
                modes=dirty_rate.modes_for(self._settings.virt_type))
        answer = dirty_rate.prediction(mig, policy, memory, rate, method)
        # The same sample under every policy: what a conductor choosing
        # the policy ([conductor] convergence_prediction = choose) reads.
        answer['by_policy'] = {
            name: dirty_rate.prediction(mig, other, memory, rate,
                                        method)['prediction']
            for name, other in sorted(mig.catalog().items())}
        LOG.info("%s: migration of %s under policy %s predicted %s (%s; "
                 "dirty rate %s)", self.host, instance_uuid, policy.name,
                 answer['prediction'], answer['reason'],
                 'unknown' if rate is None else f"{rate} B/s by {method}")
        return answer

    def sample_dirty_rates(self, instance_uuids, seconds=1):
        """See ComputeDriver: page sampling (and, on KVM, the dirty-log
        modes) of every guest at once (dirty_rate.sample_many). A
        test-driver host with a modelled pre-copy answers its configured
        dirty rate (``emulated``); one without cannot measure."""
        mig = self._settings.migration
        doms, memory = [], {}
        for uuid in instance_uuids:
            try:
                dom = self._lookup(uuid)
            except exception.DomainNotFound:
                continue
            doms.append(dom)
            memory[uuid] = self._call(dom.info, f"read the memory of "
                                                f"{uuid}")[1] * 1024
        if self._settings.is_test_driver:
            if mig.emulated_bandwidth_mib:
                answer = (mig.emulated_dirty_rate_mib * dirty_rate.MIB,
                          'emulated')
            else:
                answer = (None, 'the test driver cannot measure dirty '
                                'rates')
            rates = dict.fromkeys(memory, answer)
        else:
            rates = dirty_rate.sample_many(
                self._connection(), doms, seconds,
                deadline_s=mig.dirty_rate_deadline_s,
                modes=dirty_rate.modes_for(self._settings.virt_type))
        guests = {}
        for uuid, (rate, how) in rates.items():
            guests[uuid] = {
                'dirty_rate': None if rate is None else int(rate),
                'method': how if rate is not None else None,
                'reason': None if rate is not None else how,
                'memory': memory[uuid]}
        LOG.info("%s: dirty rates sampled over %s s: %s", self.host, seconds,
                 ', '.join(f"{u} {g['dirty_rate']} B/s" for u, g in
                           sorted(guests.items())) or 'no guest')
        return {'guests': guests, 'figures': dirty_rate.figures(mig)}

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
        dest_xml = self._emulated_guard(dest_xml, instance_uuid,
                                        doc.findtext('name'))
        started = time.monotonic()
        self._define_and_start(dest_xml, instance_uuid,
                               'accept an emulated migration of')
        elapsed_ms = int((time.monotonic() - started) * 1000)
        LOG.info("Emulated migration: defined and started %s on %s "
                 "(libvirt test driver) in %d ms", instance_uuid, self.host,
                 elapsed_ms)
        return driver.MigrationResult(emulated=True, elapsed_ms=elapsed_ms,
                                      downtime_ms=None)

    def _emulated_guard(self, dest_xml, instance_uuid, name):
        """Pass an emulated migration's XML through the guard, as libvirt
        passes a real one through the hook: the XML to define.

        :raises HypervisorError: the guard refused it, as libvirt would.
        """
        settings = self._settings.migration_guard
        if settings is None:
            return dest_xml
        verdict = guard.decide(dest_xml, settings)
        LOG.info("%s: migration guard, incoming migration of %s (emulated): "
                 "%s", self.host, name, verdict.describe())
        unwritten = guard.append_log(settings, name, verdict)
        if unwritten and settings.log_file:
            LOG.warning("%s: %s", self.host, unwritten.strip())
        if verdict.action == guard.REFUSED:
            raise exception.HypervisorError(
                host=self.host, action=f"accept the migration of "
                                       f"{instance_uuid}",
                reason=f"numamig migration guard: {verdict.reason}")
        return verdict.xml if verdict.action == guard.REWRITTEN else dest_xml

    # -- passed-through PCI devices ------------------------------------------

    def assigned_devices(self, instance_uuid):
        doc = migration_xml.parse_domain(self.get_domain_xml(instance_uuid))
        return [d.address for d in hostdev_xml.assigned_devices(doc)]

    def detach_devices(self, instance_uuid, deadline_s, on_late=None):
        """See ComputeDriver. libvirt's test driver cannot hot-unplug
        (virDomainDetachDeviceFlags: "this function is not supported by
        the connection driver", libvirt 9.0): there the records are read
        from the XML and the guest left as it is, labelled emulated; the
        migration XML carries no device either way."""
        dom = self._lookup(instance_uuid)
        if self._settings.is_test_driver:
            doc = migration_xml.parse_domain(self._call(
                dom.XMLDesc, f"read the XML of {instance_uuid}", 0))
            devices = hostdev_xml.assigned_devices(doc)
            if devices:
                LOG.info("%s: emulated unplug of %s from %s (libvirt test "
                         "driver: no hot-unplug)", self.host,
                         ', '.join(d.address for d in devices),
                         instance_uuid)
            return [d._asdict() for d in devices]
        try:
            devices = hostdev.detach(dom, self.host, deadline_s,
                                     on_late=on_late)
        except libvirt.libvirtError as exc:
            raise errors.hypervisor_error(
                exc, self.host, f"unplug the devices of {instance_uuid}")
        return [d._asdict() for d in devices]

    def reattach_devices(self, instance_uuid, detached):
        if not detached or self._settings.is_test_driver:
            return []
        dom = self._lookup(instance_uuid)
        xmls = [hostdev_xml.device_xml(hostdev_xml.AssignedDevice(**d))
                for d in detached]
        try:
            return hostdev.attach(dom, xmls, self.host)
        except libvirt.libvirtError as exc:
            raise errors.hypervisor_error(
                exc, self.host, f"plug the devices of {instance_uuid} back")

    def attach_devices(self, instance_uuid, placements, template=None):
        """See ComputeDriver. libvirt's test driver cannot hot-plug: there
        the functions are written into the definition and the test guest
        (no process behind it) restarted, so that its live XML holds them
        as a plugged guest's would; labelled emulated."""
        if not placements:
            return []
        dom = self._lookup(instance_uuid)
        template = list(template or [])
        xmls = []
        for index, (_alias, address, _cell) in enumerate(placements):
            if index < len(template):
                xmls.append(hostdev_xml.device_xml(
                    hostdev_xml.AssignedDevice(**template[index]), address))
            else:
                xmls.append(hostdev_xml.new_device_xml(address))
        if self._settings.is_test_driver:
            return self._emulated_plug(dom, instance_uuid, placements, xmls)
        try:
            return hostdev.attach(dom, xmls, self.host, persist=True)
        except libvirt.libvirtError as exc:
            raise errors.hypervisor_error(
                exc, self.host, f"plug the devices of {instance_uuid}")

    def _emulated_plug(self, dom, instance_uuid, placements, xmls):
        action = f"plug the devices of {instance_uuid} (emulated)"
        doc = migration_xml.parse_domain(self._call(
            dom.XMLDesc, action, libvirt.VIR_DOMAIN_XML_INACTIVE))
        present = {d.address for d in hostdev_xml.assigned_devices(doc)}
        devices = doc.find('devices')
        if devices is None:
            devices = etree.SubElement(doc, 'devices')
        plugged = []
        for (_alias, address, _cell), xml in zip(placements, xmls,
                                                 strict=True):
            if address not in present:
                devices.append(etree.fromstring(xml))
                plugged.append(address)
        if plugged:
            self._call(self._connection().defineXML, action,
                       etree.tostring(doc, encoding='unicode'))
            if self._call(dom.isActive, action):
                self._call(dom.destroy, action)
                self._call(dom.create, action)
        LOG.info("%s: emulated plug of %s into %s (libvirt test driver: "
                 "no hot-plug; the test guest redefined and restarted)",
                 self.host, ', '.join(plugged) or 'nothing new',
                 instance_uuid)
        return plugged

    def verify_device_affinity(self, instance_uuid, placements):
        if not placements:
            return []
        doc = migration_xml.parse_domain(self.get_domain_xml(instance_uuid))
        return hostdev.verify_affinity(self._connection(), doc, placements)

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

    def locality_samples(self, proc):
        cells = self.get_host_topology().cells
        node_of_cpu = {pcpu: cell.id for cell in cells
                       for pcpu in set(cell.cpuset) | set(cell.pcpuset)}
        host_cpus = frozenset(node_of_cpu)
        host_nodes = frozenset(cell.id for cell in cells)
        samples = []
        domains = self._call(self._connection().listAllDomains,
                             'list its running domains',
                             libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
        for dom in domains:
            try:
                samples.append(self._locality_sample(
                    dom, proc, node_of_cpu, host_cpus, host_nodes))
            except libvirt.libvirtError as exc:
                if not errors.is_missing_domain(exc):
                    LOG.warning("%s: locality of %s not measured: %s",
                                self.host, dom.UUIDString(),
                                exc.get_error_message())
        return samples

    def _locality_sample(self, dom, proc, node_of_cpu, host_cpus,
                         host_nodes):
        uuid = dom.UUIDString()
        live = dom.XMLDesc(0)
        persistent = (dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
                      if dom.isPersistent() else None)
        why = locality.excluded(live, persistent, host_cpus, host_nodes)
        try:
            memory = locality.memory_of(uuid, proc)
        except numa_locality.Unreadable as exc:
            LOG.warning("%s: numa_maps of %s unreadable: %s", self.host,
                        uuid, exc)
            memory = None
        nodes, _allowed = locality.vcpu_nodes(dom, node_of_cpu)
        return numa_locality.GuestSample(uuid, memory or {}, nodes, why)

    def move_guest_memory(self, instance_uuid, node, proc):
        cells = {c.id: c for c in self.get_host_topology().cells}
        if node not in cells:
            raise exception.HypervisorError(
                host=self.host, action=f'move the memory of {instance_uuid}',
                reason=f'no host node {node}')
        cell = cells[node]
        dom = self._lookup(instance_uuid)
        action = f'move the memory of {instance_uuid} to node {node}'
        others = set(cells) - {node}

        def migrate_pages(target):
            pid = migration_threads.qemu_pid(instance_uuid, proc)
            if pid is None:
                raise OSError(f"no QEMU of {instance_uuid} in {proc}")
            left = locality.migrate_pages(pid, others, target)
            LOG.info("%s: libvirt has no cgroup cpuset controller here: "
                     "the memory of %s moved to node %s by migrate_pages "
                     "(%d pages could not move)", self.host, instance_uuid,
                     target, left)
        try:
            live = dom.XMLDesc(0)
            _nodes, allowed = locality.vcpu_nodes(dom, {})
            # A floating guest's vCPUs belong on shared CPUs, never on
            # the dedicated ones pinned guests own.
            done, _how = locality.move(dom, live, node,
                                       frozenset(cell.cpuset), allowed,
                                       migrate_pages)
        except (ValueError, OSError) as exc:
            raise exception.HypervisorError(host=self.host, action=action,
                                            reason=str(exc))
        except libvirt.libvirtError as exc:
            raise errors.hypervisor_error(exc, self.host, action)
        return done.cpus

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
                raise exception.DomainNotFound(instance_uuid=instance_uuid,
                                               host=self.host)
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
