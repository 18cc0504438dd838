"""Only the optional C extension lives here; all other metadata is in pyproject.toml.

``optional=True``: if the compiler is missing or the build fails, the install still succeeds and
``kosumi.accel`` falls back to its numpy/Python implementations.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kosumi._speedups",
            ["src/kosumi/_speedups.c"],
            optional=True,
            extra_compile_args=["-O3", "-ffp-contract=off"],
        ),
        Extension(
            "kosumi.go._ladders",
            ["src/kosumi/go/_ladders.c"],
            optional=True,
            extra_compile_args=["-O3"],
        ),
        Extension(
            "kosumi.engine._puct",
            ["src/kosumi/engine/_puct.c"],
            optional=True,
            # no fused multiply-adds: the same bits as kosumi.engine.puct's Python versions
            extra_compile_args=["-O3", "-ffp-contract=off"],
        ),
    ]
)
