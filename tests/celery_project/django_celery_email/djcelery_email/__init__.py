from .__about__ import *  # noqa
