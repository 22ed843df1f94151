"""The --deployment file: a good one is read whole, each mistake refused.

Every refusal row changes one thing in an otherwise good file and names
the setting the message must point at and the reason it must give.
"""

import copy
import json
import os

import fixtures
import testscenarios

from numamig_ci import deployment_file
from numamig_ci import exception as ci_exception
from tests import base

load_tests = testscenarios.load_tests_apply_scenarios

GOOD = {
    'transport_url': 'rabbit://u:p@broker:5672/',
    'database': 'postgresql+psycopg2://numamig@db/numamig',
    'hosts': {
        'compute-2': {'libvirt_uri': 'qemu+ssh://compute-2/system',
                      'cpu_dedicated_set': '4-7', 'cpu_shared_set': '0-3'},
        'compute-1': {'libvirt_uri': 'qemu+ssh://compute-1/system',
                      'cpu_dedicated_set': '2-7'},
    },
}


def changed(path, value):
    """GOOD with the setting at ``path`` (a tuple of keys) set to
    ``value``, or removed when ``value`` is ``...``."""
    data = copy.deepcopy(GOOD)
    *parents, key = path
    target = data
    for parent in parents:
        target = target[parent]
    if value is ...:
        del target[key]
    else:
        target[key] = value
    return data


class GoodFileTest(base.TestCase):

    def test_every_setting_is_read(self):
        spec = deployment_file.parse('d.json', changed(
            ('report_interval',), 2))
        self.assertEqual('rabbit://u:p@broker:5672/', spec.transport_url)
        self.assertEqual(2, spec.report_interval)
        self.assertEqual(256, spec.guest_memory_mb)
        self.assertIsNone(spec.control_exchange)
        self.assertFalse(spec.real_qemu)
        # The file's order, which the scenarios pick hosts by.
        self.assertEqual(['compute-2', 'compute-1'], list(spec.hosts))
        two = spec.hosts['compute-2']
        self.assertEqual((frozenset(range(4, 8)), frozenset(range(4))),
                         (two.dedicated, two.shared))
        self.assertEqual(frozenset(), spec.hosts['compute-1'].shared)

    def test_null_shared_set_means_none(self):
        spec = deployment_file.parse('d.json', changed(
            ('hosts', 'compute-2', 'cpu_shared_set'), None))
        self.assertEqual(frozenset(), spec.hosts['compute-2'].shared)

    def test_load_reads_the_file_and_leaves_it_alone(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'd.json')
        text = json.dumps(GOOD)
        with open(path, 'w') as f:
            f.write(text)
        spec = deployment_file.load(path)
        self.assertEqual(path, spec.path)
        self.assertEqual(2, len(spec.hosts))
        with open(path) as f:
            self.assertEqual(text, f.read())


class RefusedFileTest(base.TestCase):

    scenarios = [
        ('unknown-top-level', {
            'data': changed(('report_intervall',), 2),
            'field': 'report_intervall',
            'reason': 'is not a setting numamig-ci knows (did you mean '
                      'report_interval?)'}),
        ('unknown-host-key', {
            'data': changed(('hosts', 'compute-1', 'dedicated'), '1'),
            'field': 'hosts.compute-1.dedicated',
            'reason': 'is not a setting numamig-ci knows'}),
        ('missing-transport', {
            'data': changed(('transport_url',), ...),
            'field': 'transport_url', 'reason': 'is missing'}),
        ('missing-dedicated-set', {
            'data': changed(('hosts', 'compute-1', 'cpu_dedicated_set'),
                            ...),
            'field': 'hosts.compute-1.cpu_dedicated_set',
            'reason': 'is missing'}),
        ('missing-uri', {
            'data': changed(('hosts', 'compute-2', 'libvirt_uri'), ...),
            'field': 'hosts.compute-2.libvirt_uri', 'reason': 'is missing'}),
        ('empty-dedicated-set', {
            'data': changed(('hosts', 'compute-1', 'cpu_dedicated_set'),
                            ' '),
            'field': 'hosts.compute-1.cpu_dedicated_set',
            'reason': 'names no pCPU'}),
        ('empty-shared-set', {
            'data': changed(('hosts', 'compute-2', 'cpu_shared_set'), ''),
            'field': 'hosts.compute-2.cpu_shared_set',
            'reason': 'is empty (leave it out if there is none)'}),
        ('overlapping-sets', {
            'data': changed(('hosts', 'compute-2', 'cpu_shared_set'),
                            '0-4'),
            'field': 'hosts.compute-2.cpu_shared_set',
            'reason': 'overlaps cpu_dedicated_set on pCPUs 4'}),
        ('bad-cpu-spec', {
            'data': changed(('hosts', 'compute-1', 'cpu_dedicated_set'),
                            '2-x'),
            'field': 'hosts.compute-1.cpu_dedicated_set',
            'reason': "is unusable: invalid CPU range '2-x'"}),
        ('set-as-number', {
            'data': changed(('hosts', 'compute-1', 'cpu_dedicated_set'), 3),
            'field': 'hosts.compute-1.cpu_dedicated_set',
            'reason': 'must be a string, got 3'}),
        ('interval-zero', {
            'data': changed(('report_interval',), 0),
            'field': 'report_interval',
            'reason': 'must be a positive integer, got 0'}),
        ('interval-true', {
            'data': changed(('report_interval',), True),
            'field': 'report_interval',
            'reason': 'must be a positive integer, got true'}),
        ('real-qemu-string', {
            'data': changed(('real_qemu',), 'yes'),
            'field': 'real_qemu', 'reason': 'must be true or false'}),
        ('one-host', {
            'data': changed(('hosts', 'compute-1'), ...),
            'field': 'hosts', 'reason': 'must name at least two hosts'}),
        ('host-not-object', {
            'data': changed(('hosts', 'compute-1'), 'qemu:///system'),
            'field': 'hosts.compute-1', 'reason': 'must be a JSON object'}),
        ('not-an-object', {
            'data': [GOOD], 'field': 'the file',
            'reason': 'must hold a JSON object'}),
    ]

    def test_refused_naming_the_setting(self):
        exc = self.assertRaises(ci_exception.CIDeploymentFileInvalid,
                                deployment_file.parse, 'd.json', self.data)
        self.assertIn(f"deployment file d.json: {self.field} {self.reason}",
                      str(exc))


class UnreadableFileTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'd.json')

    def test_missing_file(self):
        self.assertRaisesMessage(
            ci_exception.CIDeploymentFileInvalid,
            f"{self.path}: the file cannot be read: No such file",
            deployment_file.load, self.path)

    def test_not_json(self):
        with open(self.path, 'w') as f:
            f.write('{"hosts": ')
        self.assertRaisesMessage(
            ci_exception.CIDeploymentFileInvalid,
            f"{self.path}: the file is not JSON",
            deployment_file.load, self.path)
