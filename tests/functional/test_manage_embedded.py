"""numamig-manage and numamig-status against a running embedded deployment.

The console scripts' main() runs in this process with a config file
naming the deployment's SQLite database and the in-process transport,
so every action goes through the real conductor, agents and libvirt
test-driver hosts (2 cells x 4 cores x 2 threads, pCPUs 0,8,4,12 shared).
"""

import contextlib
import io
import json
import os
import uuid as uuid_mod

import fixtures

from numamig import embedded
from numamig.cmd import manage
from numamig.cmd import status
from tests import base

SHARED = frozenset({0, 8, 4, 12})


class EmbeddedCLIBase(base.TestCase):
    """Two test-driver hosts and the CLI's config; no test here."""

    def setUp(self):
        super().setUp()
        state = self.useFixture(fixtures.TempDir()).path
        self.dep = embedded.EmbeddedDeployment(
            [embedded.HostDefinition('host-a', 'numa-2cell-a.xml',
                                     cpu_shared_set=SHARED),
             embedded.HostDefinition('host-b', 'numa-2cell-b.xml',
                                     cpu_shared_set=SHARED)],
            state_dir=state)
        self.addCleanup(self.dep.stop)
        self.dep.start()
        self.config = os.path.join(state, 'numamig.conf')
        with open(self.config, 'w') as handle:
            handle.write(f"[DEFAULT]\ntransport_url = inproc://\n"
                         f"[database]\nconnection = {self.dep.db_url}\n")

    def cli(self, *argv, main=manage.main):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            code = main(['--config-file', self.config, *argv])
        return code, out.getvalue(), err.getvalue()

    def json_of(self, *argv, expected=0):
        code, out, err = self.cli(*argv, '--format', 'json')
        self.assertEqual(expected, code, err)
        return json.loads(out)


class ManageEmbeddedTestCase(EmbeddedCLIBase):

    def test_create_migrate_audit(self):
        created = self.json_of(
            'instance', 'create', '--host', 'host-a', '--vcpus', '2',
            '--memory', '1024', '--property', 'hw:cpu_policy=dedicated')
        uuid = created['uuid']
        # host show draws the usage of the host's last report.
        self.dep.report_all()
        code, out, _ = self.cli('host', 'show', 'host-a')
        self.assertEqual(0, code)
        self.assertIn('[1P 9P]', out)
        dry = self.json_of('migration', 'start', uuid, '--host', 'host-b',
                           '--dry-run')
        self.assertEqual('host-b', dry['dest_host'])
        self.assertEqual([], self.json_of('migration', 'list')['migrations'])
        moved = self.json_of('migration', 'start', uuid, '--host', 'host-b',
                             '--wait')
        self.assertEqual(('completed', 'host-b'),
                         (moved['status'], moved['dest_host']))
        shown = self.json_of('instance', 'show', uuid)
        self.assertEqual(('host-b', []), (shown['host'],
                                          shown['xml_check']['differences']))
        self.assertEqual(0, self.json_of('audit', 'pins')['problems'])
        self.assertEqual(0, self.cli('heal', 'claims')[0])
        code, out, _ = self.cli('upgrade', 'check', main=status.main)
        self.assertEqual(0, code, out)

    def test_locality_watch_reaches_host_and_instance_show(self):
        """An agent's look travels in its report through the conductor
        to the database that host show and instance show read (a
        test-driver host runs no QEMU: its guests are not measured)."""
        created = self.json_of('instance', 'create', '--host', 'host-a',
                               '--vcpus', '1', '--memory', '256')
        manager = self.dep.agent('host-a')
        manager.look_at_locality()
        self.dep.report_all()
        shown = self.json_of('host', 'show', 'host-a')['locality']
        self.assertEqual('report', shown['policy'])
        self.assertIsNotNone(shown['measured_at'])
        (guest,) = shown['guests']
        self.assertEqual((created['uuid'], 'not-measured'),
                         (guest['instance_uuid'], guest['state']))
        code, out, _ = self.cli('instance', 'show', created['uuid'],
                                '--no-xml')
        self.assertEqual(0, code)
        self.assertIn('locality: memory no memory seen; vCPUs ran on node',
                      out)

    def test_bad_input_changes_nothing(self):
        code, _, err = self.cli('instance', 'create', '--host', 'host-a',
                                '--vcpus', '2', '--memory', '1024',
                                '--property', 'hw:numa_nodes=4')
        self.assertEqual(127, code)
        self.assertIn('hw:numa_nodes', err)
        self.assertEqual([], self.json_of('instance', 'list')['instances'])
        code, out, err = self.cli('instance', 'create', '--host', 'host-a',
                                  '--vcpus', '2', '--memory', '1024',
                                  '--property', 'hw:cpu_polcy=dedicated',
                                  '--format', 'json')
        self.assertEqual(127, code, err)
        self.assertIn('did you mean hw:cpu_policy?', err)
        self.assertEqual(1, len(err.strip().splitlines()), err)
        self.assertEqual(127, json.loads(out)['exit_code'])
        self.assertEqual([], self.json_of('instance', 'list')['instances'])
        code, _, err = self.cli('instance', 'create', '--host', 'host-z',
                                '--vcpus', '2', '--memory', '1024')
        self.assertEqual(127, code, err)
        self.assertIn('host-z', err)
        self.assertEqual([], self.json_of('instance', 'list')['instances'])

    def test_host_show_audit_of_strangers_and_delete(self):
        created = self.json_of(
            'instance', 'create', '--host', 'host-a', '--vcpus', '2',
            '--memory', '1024', '--property', 'hw:cpu_policy=dedicated')
        uuid = created['uuid']
        # No report_all(): the agent reported right after the build.
        code, out, _ = self.cli('host', 'show', 'host-a')
        self.assertIn('[1P 9P]', out)
        # A guest numamig never recorded, pinned onto the same pCPUs.
        record = self.dep.api.instance_get(self.dep.context, uuid)
        stranger = record.obj_clone()
        stranger.uuid, stranger.name = str(uuid_mod.uuid4()), 'stranger'
        driver = self.dep.agent('host-a').driver
        driver.spawn(stranger, record.numa_topology)
        audit = self.json_of('audit', 'pins', expected=3)
        (group,) = [g for g in audit['groups']
                    if g['kind'] == 'pcpu-pinned-twice']
        self.assertEqual({uuid, stranger.uuid},
                         set(group['findings'][0]['instance_uuids']))
        self.assertEqual(0, self.cli('instance', 'delete', uuid)[0])
        self.assertNotIn(uuid, driver.list_guests())
        self.assertEqual([], [i['uuid'] for i in self.json_of(
            'instance', 'list')['instances']])
        code, out, _ = self.cli('host', 'show', 'host-a')
        self.assertNotIn('1P', out)
        again = self.json_of('instance', 'delete', uuid)
        self.assertFalse(again['deleted'])


class RestartedTestDriverAgentTest(EmbeddedCLIBase):
    """A test-driver host keeps its domains in its agent's process: the
    agent restarted, its guests are gone. Every follow-up an operator
    reaches for must say so, not that an XML was unreadable, that the
    instance is unknown, or that a domain was destroyed."""

    def restart_agent_losing_guests(self, name):
        agent = self.dep.agents.pop(name)
        # Stopping drops the test driver's connection, and with it its
        # domains, as a restarted numamig-compute process does.
        self.dep._stop_agent(agent)
        self.dep.restart_agent(name)

    def test_follow_ups_say_the_domain_is_missing(self):
        uuid = self.json_of(
            'instance', 'create', '--host', 'host-a', '--vcpus', '2',
            '--memory', '1024',
            '--property', 'hw:cpu_policy=dedicated')['uuid']
        self.restart_agent_losing_guests('host-a')
        self.assertNotIn(uuid, self.dep.agent('host-a').driver.list_guests())

        audit = self.json_of('audit', 'pins', expected=3)
        self.assertEqual(['domain-missing'],
                         [g['kind'] for g in audit['groups']])
        code, out, _ = self.cli('audit', 'pins')
        self.assertIn('guests recorded on a host that has no domain for '
                      'them (1)', out)
        self.assertNotIn('could not be read', out)

        code, out, err = self.cli('migration', 'start', uuid, '--host',
                                  'host-b', '--dry-run')
        self.assertEqual(127, code, out + err)
        self.assertIn(f'error: Instance {uuid} is recorded on host-a, but '
                      f'the hypervisor of host-a has no domain for it.',
                      err)
        self.assertNotIn('could not be found', err)

        code, out, _ = self.cli('instance', 'list')
        self.assertEqual(0, code)
        (row,) = [line for line in out.splitlines() if uuid in line]
        self.assertIn(' shutdown ', row)
        self.assertIn('shutdown: its host found no domain for it', out)

        code, out, _ = self.cli('instance', 'delete', uuid)
        self.assertEqual(0, code)
        self.assertIn('its host had no domain for it (nothing was '
                      'destroyed)', out)
        self.assertNotIn('domain destroyed', out)
        self.assertEqual([], self.json_of('instance', 'list')['instances'])

    def test_delete_of_a_present_domain_says_it_was_destroyed(self):
        uuid = self.json_of(
            'instance', 'create', '--host', 'host-a', '--vcpus', '2',
            '--memory', '1024')['uuid']
        code, out, _ = self.cli('instance', 'list')
        (row,) = [line for line in out.splitlines() if uuid in line]
        self.assertIn(' running ', row)
        self.assertNotIn('shutdown:', out)
        deleted = self.json_of('instance', 'delete', uuid)
        self.assertEqual((True, 'present'),
                         (deleted['deleted'], deleted['domain']))
