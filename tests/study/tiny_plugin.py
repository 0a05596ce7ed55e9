"""A study plugin module: importing it registers the tests' tiny CNN (worker processes import
it through the study's ``plugins:``)."""

from tests.tiny_model import register_tiny_cnn

register_tiny_cnn()
