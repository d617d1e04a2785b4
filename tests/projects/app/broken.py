"""Imports that cannot be resolved are reported at the import."""

import json
import os.path

import app.missing_module  # E: GPU081

from . import dims
from .dims import D_OUT, NOT_DEFINED  # E: GPU082
from .nothere import M  # E: GPU081

SIZES = (json, os.path, dims, D_OUT, M)
