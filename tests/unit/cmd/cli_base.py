"""Shared set-up of the numamig-manage / numamig-status tests.

A synced SQLite database named by a config file, a ``run`` that calls a
console script's main() and captures its output, builders (from the
persistence tests) for records, a domain XML builder and a mocked
conductor RPC client.
"""

import contextlib
import io
import os
import sys
from unittest import mock

import fixtures
import oslo_messaging as messaging

from numamig import fingerprint
from numamig.audit import usage as audit_usage
from numamig.cmd import manage
from numamig.db import compute_nodes
from numamig.db import instances
from numamig.numa import usage
from numamig.virt.libvirt import guest_xml
from numamig.virt.libvirt import numa_info
from tests import base
from tests.fixtures import database
from tests.unit.db import base as db_base

make_instance = db_base.make_instance
make_migration = db_base.make_migration
make_context = db_base.make_context
new_uuid = db_base.new_uuid


def from_the_wire(exc):
    """``exc`` as oslo.messaging rebuilds it on the caller's side of a
    call over a real broker (its str followed by the peer's traceback)."""
    from oslo_messaging._drivers import common as messaging_common

    from numamig import exception
    try:
        raise exc
    except Exception:  # noqa: BLE001 - serialized, as a server does
        wire = messaging_common.serialize_remote_exception(sys.exc_info())
    return messaging_common.deserialize_remote_exception(
        wire, [exception.__name__])


class CLITestCase(base.TestCase):
    """``self.db`` is the database the CLI reads; ``self.api`` its RPC."""

    main = staticmethod(manage.main)

    def setUp(self):
        super().setUp()
        fixture = self.useFixture(database.SQLiteDatabase())
        self.db = fixture.db
        self.config = os.path.join(self.conf.conf.state_path, 'nm.conf')
        self.write_config(f"[database]\nconnection = {fixture.url}\n")
        self.api = mock.Mock(name='ConductorAPI')
        # A conductor older than API 1.5: --wait polls migration_get.
        self.api.migration_wait.side_effect = \
            messaging.UnsupportedVersion('1.5')
        self.useFixture(fixtures.MockPatch(
            'numamig.cmd.manage_commands._access.conductor',
            return_value=self.api))

    def write_config(self, text):
        with open(self.config, 'w') as handle:
            handle.write(text)

    def run_cli(self, *argv):
        """Return (exit code, stdout, stderr) of ``main(argv)``."""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            code = self.main(['--config-file', self.config, *argv])
        return code, out.getvalue(), err.getvalue()

    def add_report(self, host='src', **overrides):
        overrides.setdefault('reported_at', _now())
        return compute_nodes.save_report(
            self.db, db_base.make_report(host, **overrides))

    def report_as_recorded(self, host='src'):
        """Store a report of ``host`` counting exactly what the records
        hold there, as an agent's recompute would."""
        held = [r.instance for r in instances.get_all(self.db, host=host)]
        claims = [r.instance for r in
                  instances.get_claims_on_host(self.db, host)]
        topologies = [i.numa_topology for i in held] + [
            i.migration_context.new_numa_topology for i in claims]
        topology = usage.host_with_usage(
            audit_usage.without_usage(db_base.make_host_topology()),
            topologies, on_conflict=lambda *a: None)
        pairs = sorted({(i.project_id, i.uuid) for i in held + claims})
        return self.add_report(host, topology=topology,
                               fingerprint=fingerprint.compute(pairs))

    def add_instance(self, host='src', **overrides):
        return instances.create(self.db,
                                make_instance(host, **overrides)).instance


def domain_xml(instance, host_topology=None):
    """The domain XML numamig writes for a recorded, placed instance."""
    topology = instance.numa_topology
    host_topology = host_topology or db_base.make_host_topology()
    info = numa_info.build_migrate_info(topology, host_topology)
    return guest_xml.build_domain_xml(instance, topology, info, 'test')


def _now():
    import datetime
    return datetime.datetime.now(datetime.UTC)
