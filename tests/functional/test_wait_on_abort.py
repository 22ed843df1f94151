"""An operator waits on a migration another operator aborts (issue 14 #9).

Daemons as processes over RabbitMQ and PostgreSQL. The destination
agent is frozen (SIGSTOP) so that the conductor's task waits on it
while the first operator's ``migration start --wait`` follows the
migration and a second operator aborts it. The waiting command must end
with the migration shown ``cancelled``, exit 1 as its help says, and no
traceback anywhere; the conductor's late refusal record for a migration
that was cancelled meanwhile must not turn into an error either.
"""

import os
import signal
import subprocess
import sys
import time

from numamig.db import migrations
from tests.functional import test_multiprocess

BIN = os.path.dirname(sys.executable)
# The conductor's wait on a destination: the frozen one times out soon.
CHECK_TIMEOUT_S = 6


class WaitOnAbortTest(test_multiprocess.MultiProcessTestBase):

    def write_config(self, host, caps=None):
        path = super().write_config(host, caps)
        with open(path, 'a') as handle:
            handle.write(f"[DEFAULT]\nrpc_response_timeout_migration = "
                         f"{CHECK_TIMEOUT_S}\n")
        return path

    def manage(self, *argv, wait=True):
        config = os.path.join(self.dir, 'client.conf')
        with open(config, 'w') as handle:
            handle.write(f"[DEFAULT]\ntransport_url = {self.rpc.url}\n"
                         f"control_exchange = {self.rpc.exchange}\n"
                         f"[database]\nconnection = {self.db.url}\n")
        proc = subprocess.Popen(
            [os.path.join(BIN, 'numamig-manage'), '--config-file', config,
             *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, text=True)
        if not wait:
            return proc
        out, err = proc.communicate(timeout=60)
        return proc.returncode, out, err

    def _agent(self, host):
        return next(proc for name, proc in self.procs if name == host)

    def _admitted(self, instance_uuid):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = migrations.get_all(self.db.db,
                                       instance_uuid=instance_uuid)
            if found and found[-1].status == 'accepted' and \
                    not found[-1].waiting:
                return found[-1]
            time.sleep(0.1)
        self.fail("the migration was never admitted")

    def test_the_waiting_command_sees_the_abort(self):
        source, dest = sorted(self.hosts)
        instance = self.create(source, 'wait-on-abort')
        frozen = self._agent(dest)
        frozen.send_signal(signal.SIGSTOP)
        self.addCleanup(frozen.send_signal, signal.SIGCONT)
        waiting = self.manage('migration', 'start', instance.uuid, '--host',
                              dest, '--wait', '--wait-timeout', '60',
                              wait=False)
        migration = self._admitted(instance.uuid)
        code, out, err = self.manage('migration', 'abort', migration.uuid)
        self.assertEqual(0, code, out + err)
        out, err = waiting.communicate(timeout=60)
        frozen.send_signal(signal.SIGCONT)
        self.assertEqual(1, waiting.returncode, out + err)
        self.assertIn('CANCELLED', out.upper())
        self.assertNotIn('Traceback', out + err)
        self.assertEqual('cancelled', migrations.get(
            self.db.db, migration.uuid).status)
        # The conductor's task, back from the frozen destination, finds
        # the migration cancelled: no error recorded, nothing traced.
        time.sleep(CHECK_TIMEOUT_S + 2)
        self.assertEqual('cancelled', migrations.get(
            self.db.db, migration.uuid).status)
        self.assertNotIn('Traceback', self.log_of(self.conductor_host))
