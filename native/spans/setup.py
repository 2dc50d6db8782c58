"""The sentence splitter in C (core.sentences). `optional`: where it cannot be compiled (no C
compiler or Python headers), pip still installs the package without it, and core.sentences
splits in Python (the same spans, slower); tests/core/test_sentences_native.py then fails,
saying so."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("litsum_spans", ["spans.c"], extra_compile_args=["-O2"], optional=True)])
