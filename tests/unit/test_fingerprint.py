"""Tests of the podfingerprint v001 guest-set fingerprint."""

import testscenarios

from numamig import fingerprint
from tests import base

# Compatibility vectors: the first two are issue 5's; the others are the
# "tiny" and "small" data sets the upstream podfingerprint project
# (k8stopologyawareschedwg/podfingerprint, testdata/compat-*) checks its
# Go implementation against, as (namespace, name) pairs.
_SMALL_SET = [
    ('analytics', 'controller-69dkj'), ('kube-public', 'subscriber-tq6v7'),
    ('kube-public', 'transformer-hfbng'), ('kube-public', 'validator-c6pn5'),
    ('kube-system', 'proxy-wszrd'), ('middleware', 'processor-jkrl4'),
    ('network', 'gateway-vsll5'), ('network', 'importer-kzdfr'),
    ('network', 'importer-q5vt9'), ('staging', 'prometheus-bwgbn'),
]


class TestVectors(testscenarios.WithScenarios, base.TestCase):

    scenarios = [
        ('empty', {'pairs': [], 'expected': 'pfp0v001ef46db3751d8e999'}),
        ('one_pod', {'pairs': [('namespace1', 'pod1')],
                     'expected': 'pfp0v0019e0420efb37746c6'}),
        ('compat_tiny_3pods_1ns', {
            'pairs': [('production', 'jaeger-dpgjk'),
                      ('production', 'nginx-rt684'),
                      ('production', 'envoy-g9m22')],
            'expected': 'pfp0v001607b76a0e9d3aeb4'}),
        ('compat_small_10pods_3ns', {
            'pairs': _SMALL_SET, 'expected': 'pfp0v001567144e4a561bb5a'}),
    ]

    def test_compute(self):
        self.assertEqual(self.expected, fingerprint.compute(self.pairs))

    def test_compute_reversed_order(self):
        self.assertEqual(self.expected,
                         fingerprint.compute(reversed(self.pairs)))

    def test_incremental(self):
        fp = fingerprint.Fingerprint()
        for namespace, name in self.pairs:
            fp.add(namespace, name)
        self.assertEqual(self.expected, fp.sign())
        self.assertEqual(len(self.pairs), len(fp))

    def test_is_valid(self):
        self.assertTrue(fingerprint.is_valid(self.expected))


class TestFingerprint(base.TestCase):

    def test_duplicate_guest_counts_once(self):
        pairs = [('p1', 'u1'), ('p2', 'u2')]
        self.assertEqual(fingerprint.compute(pairs),
                         fingerprint.compute(pairs + [('p1', 'u1')]))

    def test_namespace_matters(self):
        self.assertNotEqual(fingerprint.compute([('p1', 'u1')]),
                            fingerprint.compute([('p2', 'u1')]))

    def test_sign_is_repeatable_and_follows_updates(self):
        fp = fingerprint.Fingerprint([('p1', 'u1')])
        first = fp.sign()
        self.assertEqual(first, fp.sign())
        fp.update([('p2', 'u2')])
        self.assertEqual(
            fingerprint.compute([('p1', 'u1'), ('p2', 'u2')]), fp.sign())
        self.assertNotEqual(first, fp.sign())

    def test_guest_hash_uses_namespace_as_seed(self):
        # Swapping namespace and name must change the hash: the namespace
        # is a seed, not a concatenated prefix.
        self.assertNotEqual(fingerprint.guest_hash('a', 'b'),
                            fingerprint.guest_hash('b', 'a'))

    def test_non_string_rejected(self):
        self.assertRaisesMessage(TypeError, "guest name must be a string",
                                 fingerprint.compute, [('p1', 42)])
        self.assertRaisesMessage(TypeError, "namespace must be a string",
                                 fingerprint.compute, [(None, 'u1')])

    def test_input_not_consumed_twice(self):
        pairs = [('p1', 'u1')]
        fingerprint.compute(pairs)
        self.assertEqual([('p1', 'u1')], pairs)


class TestIsValid(testscenarios.WithScenarios, base.TestCase):

    scenarios = [
        ('too_short', {'value': 'pfp0v001ef46'}),
        ('wrong_version', {'value': 'pfp0v002ef46db3751d8e999'}),
        ('upper_case', {'value': 'pfp0v001EF46DB3751D8E999'}),
        ('not_hex', {'value': 'pfp0v001ef46db3751d8e99z'}),
        ('not_string', {'value': None}),
    ]

    def test_rejected(self):
        self.assertFalse(fingerprint.is_valid(self.value))
