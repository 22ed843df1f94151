"""numamig-manage numa fit: output and exit codes."""

import io
import json
import os

import fixtures

from numamig.cmd import manage
from tests import base

EXAMPLES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'etc',
                        'numamig', 'examples')
HOST = os.path.join(EXAMPLES, 'host-2cell-smt.json')
REQUEST = os.path.join(EXAMPLES, 'request-pinned-hugepages.json')


class NumaFitCommandTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.out = self.useFixture(fixtures.MonkeyPatch(
            'sys.stdout', io.StringIO())).new_value
        self.err = self.useFixture(fixtures.MonkeyPatch(
            'sys.stderr', io.StringIO())).new_value
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def _write(self, name, data):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as handle:
            handle.write(data if isinstance(data, str) else json.dumps(data))
        return path

    def _run(self, *argv):
        return manage.main(['--config-file', os.devnull, 'numa', 'fit',
                            *argv])

    def test_examples_fit(self):
        self.assertEqual(0, self._run('--host-topology', HOST,
                                      '--request', REQUEST))
        output = json.loads(self.out.getvalue())
        self.assertTrue(output['fits'])
        self.assertEqual([1, 0], [c['host_cell'] for c in output['cells']])
        self.assertEqual([9], output['cells'][0]['emulator_pcpus'])

    def test_pack_strategy(self):
        self.assertEqual(0, self._run('--host-topology', HOST, '--request',
                                      REQUEST, '--strategy', 'pack'))
        output = json.loads(self.out.getvalue())
        self.assertEqual([0, 1], [c['host_cell'] for c in output['cells']])

    def test_no_fit_exits_1_with_reason(self):
        request = self._write('big.json', {
            'vcpus': 64, 'memory_mb': 1024,
            'extra_specs': {'hw:cpu_policy': 'dedicated'}})
        self.assertEqual(1, self._run('--host-topology', HOST, '--request',
                                      request))
        output = json.loads(self.out.getvalue())
        self.assertFalse(output['fits'])
        self.assertIn("guest cell 0 fits on no host cell", output['reason'])

    def test_bad_input_exits_2(self):
        bad_json = self._write('bad.json', '{not json')
        bad_spec = self._write('spec.json', {
            'vcpus': 2, 'memory_mb': 1024,
            'extra_specs': {'hw:cpu_policy': 'pinned'}})
        for request in (bad_json, bad_spec):
            self.assertEqual(2, self._run('--host-topology', HOST,
                                          '--request', request))
        self.assertEqual(2, self._run('--host-topology', '/nonexistent',
                                      '--request', REQUEST))
        self.assertEqual(2, self._run('--request', REQUEST))
        self.assertEqual(2, self._run('--host-topology', HOST, '--request',
                                      REQUEST, '--strategy', 'dense'))
        self.assertIn("hw:cpu_policy='pinned'", self.err.getvalue())
        # fit speaks JSON only: one error object per refusal on stdout.
        answers = [json.loads(line)
                   for line in self.out.getvalue().splitlines()]
        self.assertEqual([2] * 5, [a['exit_code'] for a in answers])
        self.assertIn("hw:cpu_policy='pinned'", answers[1]['error'])

    def test_specs_are_checked_as_instance_create_checks_them(self):
        # Issue 44: one rule for flavor-like specs, keys and values.
        for extra_specs, words in (
                ({'hw:mem_pgae_size': '1GB'},
                 "did you mean hw:mem_page_size?"),
                ({'hw:live_migration_policy': 'gold'},
                 "Unknown live-migration policy gold")):
            request = self._write('spec.json', {
                'vcpus': 2, 'memory_mb': 1024,
                'extra_specs': dict(extra_specs,
                                    **{'hw:cpu_policy': 'dedicated'})})
            self.assertEqual(2, self._run('--host-topology', HOST,
                                          '--request', request))
            self.assertIn(words, self.err.getvalue())

    def test_batch(self):
        with open(HOST) as handle:
            host = json.load(handle)
        with open(REQUEST) as handle:
            request = json.load(handle)
        lines = [
            json.dumps({'name': 'fits', 'host': host, 'request': request}),
            '',
            json.dumps({'name': 'no-numa', 'host': host,
                        'request': dict(request, vcpus=64,
                                        extra_specs={})}),
        ]
        path = self._write('cases.jsonl', '\n'.join(lines))
        self.assertEqual(0, self._run('--batch', path))
        results = [json.loads(line)
                   for line in self.out.getvalue().splitlines()]
        self.assertEqual(['fits', 'no-numa'], [r['name'] for r in results])
        self.assertTrue(results[0]['fits'])
        self.assertGreater(results[0]['elapsed_us'], 0)
        self.assertEqual({'fits': True, 'cells': []},
                         {k: results[1][k] for k in ('fits', 'cells')})

    def test_batch_exit_codes(self):
        with open(HOST) as handle:
            host = json.load(handle)
        no_fit = {'name': 'no', 'host': host, 'request': {
            'vcpus': 64, 'memory_mb': 1024,
            'extra_specs': {'hw:cpu_policy': 'dedicated'}}}
        path = self._write('no.jsonl', json.dumps(no_fit))
        self.assertEqual(1, self._run('--batch', path))
        path = self._write('bad.jsonl', json.dumps(no_fit) + '\n[1]\n')
        self.assertEqual(2, self._run('--batch', path))
        last = json.loads(self.out.getvalue().splitlines()[-1])
        self.assertEqual('line 2', last['name'])
        self.assertIn('must be a JSON object', last['error'])
