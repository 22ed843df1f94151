"""A guest whose CPU a destination cannot run, refused over the real wire.

Two test-driver hosts of the same model, the richer one (host-a) with a
feature the other lacks. A host-passthrough guest of host-a sees that
feature, so host-b must refuse it: asked for by name, at the
destination's precheck (libvirt's test driver cannot compare CPUs, so
the agent judges by its reported CPU, numamig.cpumodel); scheduled, by
the conductor's CPU filter before any host is asked. Either way the
operator reads one line naming the missing feature, over RabbitMQ as
in process.
"""

import contextlib
import io
import json
import os

import fixtures
from lxml import etree
import testscenarios

from numamig import embedded
from numamig.cmd import manage
from tests import base
from tests.fixtures import deployment
from tests.fixtures import rpc as rpc_fixture

load_tests = testscenarios.load_tests_apply_scenarios


def _caps_with_features(tmpdir, name, source, features):
    """A copy of a shipped capabilities file whose host CPU lists
    ``features``."""
    doc = etree.parse(os.path.join(embedded.HOSTS_DIR, source))
    cpu = doc.find('./host/cpu')
    anchor = cpu.find('topology')
    for feature in features:
        anchor.addprevious(etree.Element('feature', name=feature))
    path = os.path.join(tmpdir, name)
    doc.write(path)
    return path


class CPUModelRefusalTestCase(base.TestCase):

    scenarios = rpc_fixture.TRANSPORT_SCENARIOS

    def setUp(self):
        super().setUp()
        tmpdir = self.useFixture(fixtures.TempDir()).path
        rich = _caps_with_features(tmpdir, 'rich.xml', 'numa-2cell-a.xml',
                                   ['avx2', 'sha-ni'])
        poor = _caps_with_features(tmpdir, 'poor.xml', 'numa-2cell-b.xml',
                                   ['avx2'])
        fixture = self.useFixture(deployment.DeploymentFixture(
            self.transport_kind,
            [embedded.HostDefinition('host-a', rich),
             embedded.HostDefinition('host-b', poor)],
            cli_names=True))
        self.dep = fixture.deployment
        self.config = fixture.cli_config()

    def cli(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            code = manage.main(['--config-file', self.config, *argv])
        return code, out.getvalue(), err.getvalue()

    def passthrough_guest(self):
        """A pinned guest on host-a whose CPU is host-passthrough (numamig
        creates guests with the default CPU: its domain is redefined as
        an operator's image would have it)."""
        code, out, err = self.cli('instance', 'create', '--host', 'host-a',
                                  '--vcpus', '2', '--memory', '1024',
                                  '--property', 'hw:cpu_policy=dedicated',
                                  '--format', 'json')
        self.assertEqual(0, code, err)
        uuid = json.loads(out)['uuid']
        conn = self.dep.agent('host-a').driver._connection()
        dom = conn.lookupByUUIDString(uuid)
        doc = etree.fromstring(dom.XMLDesc())
        cpu = doc.find('cpu')
        if cpu is None:
            cpu = etree.SubElement(doc, 'cpu')
        cpu.set('mode', 'host-passthrough')
        dom.destroy()
        conn.defineXML(etree.tostring(doc, encoding='unicode')).create()
        return uuid

    def assert_one_line_naming_the_feature(self, text):
        (line,) = text.strip().splitlines()
        self.assertIn('host-b', line)
        self.assertIn("lacks: sha-ni", line)
        self.assertNotIn('avx2,', line)
        self.assertNotIn('Traceback', line)
        return line

    def test_requested_destination_refuses_at_its_precheck(self):
        uuid = self.passthrough_guest()
        code, out, err = self.cli('migration', 'start', uuid, '--host',
                                  'host-b', '--wait', '--format', 'json')
        self.assertNotEqual(0, code, out + err)
        error = json.loads(out)['error']
        line = self.assert_one_line_naming_the_feature(error)
        self.assertIn('cannot run the CPU of instance', line)
        self.assertIn('host-passthrough EPYC', line)
        shown = json.loads(self.cli('instance', 'show', uuid, '--no-xml',
                                    '--format', 'json')[1])
        self.assertEqual('host-a', shown['host'])

    def test_scheduled_destination_refused_by_the_cpu_filter(self):
        uuid = self.passthrough_guest()
        code, out, err = self.cli('migration', 'start', uuid, '--wait',
                                  '--format', 'json')
        self.assertNotEqual(0, code, out + err)
        error = json.loads(out)['error']
        line = self.assert_one_line_naming_the_feature(error)
        self.assertIn("CPU cannot run the guest's", line)
        self.assertIn("no candidate's CPU can run the CPU of instance", line)

    def test_guest_of_the_default_cpu_moves(self):
        code, out, err = self.cli('instance', 'create', '--host', 'host-a',
                                  '--vcpus', '2', '--memory', '1024',
                                  '--property', 'hw:cpu_policy=dedicated',
                                  '--format', 'json')
        self.assertEqual(0, code, err)
        uuid = json.loads(out)['uuid']
        code, out, err = self.cli('migration', 'start', uuid, '--host',
                                  'host-b', '--wait', '--format', 'json')
        self.assertEqual(0, code, out + err)
