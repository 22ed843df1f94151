"""Tests of the CPU model scenario's pure parts and its domain rewrite."""

from lxml import etree

from numamig import objects
from numamig_ci.backends import nested
from numamig_ci.scenarios import cpu_models
from tests import base


def _cpu(model, features):
    return objects.HostCPU(arch='x86_64', model=model, host_model=model,
                           host_model_features=sorted(features))


class PureTest(base.TestCase):

    def test_richer_host_first(self):
        cpus = {'a': _cpu('Opteron_G3', ['svm']),
                'b': _cpu('EPYC', ['svm', 'sha-ni', 'rdseed'])}
        self.assertEqual(['b', 'a'], cpu_models.richer_first(cpus))

    def test_named_missing_reads_feature_names_from_the_error(self):
        error = ("host b cannot run the CPU of instance x (custom EPYC): "
                 "missing features: sha-ni, rdseed")
        self.assertEqual(['rdseed', 'sha-ni'], cpu_models.named_missing(
            error, {'sha-ni', 'rdseed', 'avx2'}))
        self.assertEqual([], cpu_models.named_missing('no', {'sha-ni'}))


class WithCPUTest(base.TestCase):

    XML = ("<domain type='qemu'><name>g</name><vcpu>1</vcpu>"
           "<cpu><numa><cell id='0' cpus='0' memory='131072'/></numa>"
           "</cpu></domain>")

    def test_cpu_replaced_numa_kept_type_kvm(self):
        doc = etree.fromstring(nested.with_cpu(
            self.XML, "<cpu mode='host-model'/>", kvm=1))
        self.assertEqual('kvm', doc.get('type'))
        (cpu,) = doc.findall('cpu')
        self.assertEqual('host-model', cpu.get('mode'))
        self.assertIsNotNone(cpu.find('numa/cell'))
        plain = etree.fromstring(nested.with_cpu(
            self.XML, "<cpu mode='custom'><model>EPYC</model></cpu>",
            kvm=0))
        self.assertEqual('qemu', plain.get('type'))
        self.assertEqual('EPYC', plain.findtext('cpu/model'))
