"""What an operator meets when ``migration start`` cannot be sent.

Over the local RabbitMQ, the console script as an operator runs it (a
fresh process, prepared as every command line is: eventlet hidden,
oslo_utils.strutils deferred, kombu loaded without PyYAML): a broker
that is down, a transport URL naming no driver, a broker refusing the
login, and a broker without any conductor on the deployment's exchange.
Each ends within a bound, with one line naming what is wrong and exit
code 255 (the conductor cannot be reached), nothing asked of anyone.
"""

import json
import os
import subprocess
import sys
import time
import uuid

import fixtures
import testscenarios

from tests import base

load_tests = testscenarios.load_tests_apply_scenarios

INSTANCE = '7d3c1a7e-0c6c-4b8e-9f64-2d2a4a1b0c11'
BOUND_S = 30


class StartErrorsTest(base.TestCase):

    scenarios = [
        ('broker down', {
            'url': 'rabbit://guest:secret@127.0.0.1:1/',
            'words': ('Cannot reach the message broker',
                      'rabbit://guest:***@127.0.0.1:1/')}),
        ('no such driver', {
            'url': 'rabbbit://guest:secret@127.0.0.1:5672/',
            'words': ('rabbbit',)}),
        ('login refused', {
            'url': 'rabbit://guest:secret@127.0.0.1:5672/',
            'words': ('refused this client', 'refused the login',
                      'rabbit://guest:***@127.0.0.1:5672/')}),
        ('vhost refused', {
            'url': 'rabbit://guest:guest@127.0.0.1:5672/no-such-vhost',
            'words': ('refused this client', 'no-such-vhost')}),
        # Several hosts: oslo.messaging's failover (numamig's direct
        # client leaves it to oslo.messaging).
        ('no conductor, two hosts', {
            'url': 'rabbit://guest:guest@127.0.0.1:5672,'
                   'guest:guest@127.0.0.1:5672/',
            'words': ('No conductor answered on topic numamig-conductor-',
                      'nothing was asked of it')}),
        ('no conductor', {
            'url': 'rabbit://guest:guest@127.0.0.1:5672/',
            'words': ('No conductor answered on topic numamig-conductor-',
                      'nothing was asked of it')}),
    ]

    def start(self, direct):
        work = self.useFixture(fixtures.TempDir()).path
        config = os.path.join(work, 'numamig.conf')
        # A deployment of its own: no conductor listens on this exchange.
        exchange = f'start-errors-{uuid.uuid4().hex[:8]}'
        with open(config, 'w', encoding='utf-8') as handle:
            handle.write(f"[DEFAULT]\nstate_path = {work}\n"
                         f"transport_url = {self.url}\n"
                         f"control_exchange = {exchange}\n"
                         f"cli_broker_retries = 0\n"
                         f"cli_conductor_timeout = 1\n"
                         f"cli_direct_rpc = {str(direct).lower()}\n")
        started = time.monotonic()
        run = subprocess.run(
            [os.path.join(os.path.dirname(sys.executable), 'numamig-manage'),
             '--config-file', config, 'migration', 'start', INSTANCE,
             '--host', 'somewhere', '--format', 'json'],
            capture_output=True, text=True, timeout=120)
        self.assertLess(time.monotonic() - started, BOUND_S)
        # The exchange in the message is the run's own.
        return run.returncode, run.stdout.replace(exchange, 'EXCHANGE'), \
            run.stderr.replace(exchange, 'EXCHANGE')

    def test_the_same_through_oslo_messaging_and_directly(self):
        # numamig.conductor.direct_rpc (the default) and oslo.messaging
        # (cli_direct_rpc = false): byte for byte the same.
        self.assertEqual(self.start(direct=False), self.start(direct=True))

    def test_one_line_and_255(self):
        run = subprocess.CompletedProcess(None, *self.start(direct=True))
        self.assertEqual(255, run.returncode, run.stderr)
        self.assertEqual(1, len(run.stderr.strip().splitlines()), run.stderr)
        self.assertNotIn('Traceback', run.stderr)
        for word in self.words:
            self.assertIn(word, run.stderr)
        self.assertNotIn('secret', run.stdout + run.stderr)
        answer = json.loads(run.stdout)
        self.assertEqual(255, answer['exit_code'])
        self.assertEqual(run.stderr.strip(), f"error: {answer['error']}")
