"""The daemons, started as operators start them, with operators' mistakes."""

import os
import subprocess
import sys

import fixtures

from tests import base
from tests.fixtures import rpc as rpc_fixture

BIN = os.path.dirname(sys.executable)


class StartFailureTest(base.TestCase):

    def _start(self, daemon, config):
        work = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(work, 'numamig.conf')
        with open(path, 'w', encoding='utf-8') as handle:
            handle.write(config.format(work=work))
        return subprocess.run([os.path.join(BIN, daemon), '--config-file',
                               path], capture_output=True, text=True,
                              timeout=60)

    def assert_one_line(self, run, fragment):
        self.assertEqual(2, run.returncode, run.stdout + run.stderr)
        lines = run.stderr.strip().splitlines()
        self.assertEqual(1, len(lines), run.stderr)
        self.assertIn(fragment, lines[0])
        self.assertNotIn('Traceback', run.stdout + run.stderr)

    def test_bad_number(self):
        for daemon in ('numamig-conductor', 'numamig-compute'):
            run = self._start(daemon, "[DEFAULT]\nstate_path = {work}\n"
                                      "report_interval = zero\n")
            self.assert_one_line(
                run, f"{daemon} cannot start: Invalid configuration option "
                     f"[DEFAULT] report_interval")

    def test_refused_by_the_broker(self):
        reason = rpc_fixture.rabbit_unreachable_reason()
        if reason:
            self.skipTest(reason)
        for daemon in ('numamig-conductor', 'numamig-compute'):
            run = self._start(
                daemon, "[DEFAULT]\nstate_path = {work}\n"
                        "transport_url = rabbit://guest:not-the-password@"
                        "127.0.0.1:5672/\n")
            self.assert_one_line(
                run, f"{daemon} cannot start: The message broker "
                     f"rabbit://guest:***@127.0.0.1:5672/ refused this "
                     f"client: it refused the login")
            self.assertIn('ACCESS_REFUSED', run.stderr)
            self.assertNotIn('not-the-password', run.stdout + run.stderr)

    def test_in_process_transport(self):
        # Installed for numamig-embedded; a daemon on it hears no peer.
        for daemon in ('numamig-conductor', 'numamig-compute'):
            run = self._start(daemon, "[DEFAULT]\nstate_path = {work}\n"
                                      "transport_url = inproc://\n")
            self.assert_one_line(
                run, f"{daemon} cannot start: Invalid configuration option "
                     f"[DEFAULT] transport_url: inproc:// carries messages "
                     f"inside one process only")

    def test_unsynced_database(self):
        run = self._start('numamig-conductor',
                          "[DEFAULT]\nstate_path = {work}\n"
                          "transport_url = fake://\n")
        self.assert_one_line(run, "run 'numamig-manage db sync'")

    def test_libpqs_multi_host_form_with_ports(self):
        # What the PostgreSQL manual shows, and SQLAlchemy cannot read:
        # one line naming the form it reads, not a traceback.
        run = self._start('numamig-conductor',
                          "[DEFAULT]\nstate_path = {work}\n"
                          "transport_url = fake://\n[database]\n"
                          "connection = postgresql+psycopg2://numamig@"
                          "db1:5432,db2:5433/numamig"
                          "?target_session_attrs=read-write\n")
        self.assert_one_line(run, "?host=HOST1:PORT&host=HOST2:PORT")


class FileModesTest(base.TestCase):
    """What a daemon writes is not readable by every user of the host."""

    def test_database_and_log_modes_and_a_readable_password(self):
        work = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(work, 'numamig.conf')
        with open(path, 'w', encoding='utf-8') as handle:
            handle.write(f"[DEFAULT]\nstate_path = {work}/state\n"
                         f"log_file = {work}/log/conductor.log\n"
                         f"transport_url = rabbit://nm:secret@127.0.0.1:1/\n")
        os.chmod(path, 0o644)
        # Stops at the unsynced database, after creating its files.
        run = subprocess.run(
            [os.path.join(BIN, 'numamig-conductor'), '--config-file', path],
            capture_output=True, text=True, timeout=60,
            preexec_fn=lambda: os.umask(0o022))
        self.assertEqual(2, run.returncode, run.stdout + run.stderr)
        modes = {name: oct(os.stat(os.path.join(work, name)).st_mode & 0o777)
                 for name in ('state', 'state/numamig.sqlite', 'log',
                              'log/conductor.log')}
        self.assertEqual({'state': '0o750', 'state/numamig.sqlite': '0o600',
                          'log': '0o750', 'log/conductor.log': '0o640'},
                         modes)
        with open(os.path.join(work, 'log', 'conductor.log')) as f:
            log = f.read()
        self.assertIn(f'{path} holds a password and every user of this '
                      f'host can read it (mode 0644)', log)
        self.assertNotIn('secret', log)
