"""The nested host image's cache key and location."""

import os
import shutil

import fixtures

from numamig_ci.nested import image
from tests import base


class ImageCacheTest(base.TestCase):

    def setUp(self):
        super().setUp()
        self.recipe = self.useFixture(fixtures.TempDir()).path
        for name in image.RECIPE_FILES:
            shutil.copy(os.path.join(image.RECIPE_DIR, name), self.recipe)
        self.useFixture(fixtures.MonkeyPatch(
            'numamig_ci.nested.image.RECIPE_DIR', self.recipe))
        self.cache = self.useFixture(fixtures.TempDir()).path

    def test_key_changes_with_the_recipe(self):
        before = image.recipe_key()
        with open(os.path.join(self.recipe, 'l1-init'), 'a') as f:
            f.write('# changed\n')
        self.assertNotEqual(before, image.recipe_key())

    def test_only_a_finished_image_counts_as_cached(self):
        target = image.image_dir(self.cache)
        os.makedirs(target)
        for name in image.IMAGE_FILES[:-1]:
            open(os.path.join(target, name), 'w').close()
        self.assertIsNone(image.cached(self.cache))
        open(os.path.join(target, image.IMAGE_FILES[-1]), 'w').close()
        self.assertEqual(target, image.cached(self.cache))

    def test_cache_root_from_the_environment(self):
        self.useFixture(fixtures.EnvironmentVariable('NUMAMIG_NESTED_CACHE'))
        self.useFixture(fixtures.EnvironmentVariable('XDG_CACHE_HOME',
                                                     '/x/cache'))
        self.assertEqual('/x/cache/numamig/nested', image.cache_root())
        self.useFixture(fixtures.EnvironmentVariable('NUMAMIG_NESTED_CACHE',
                                                     '/y'))
        self.assertEqual('/y', image.cache_root())

    def test_unreachable_mirror_is_a_reason(self):
        reason = image.mirror_unreachable('http://127.0.0.1:9/debian')
        self.assertIn('mirror http://127.0.0.1:9/debian is unreachable',
                      reason)
