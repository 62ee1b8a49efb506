"""The build of pocketmq's optional C extension, pocketmq._speedups (src/pocketmq/_native).

Everything else about the package is declared in pyproject.toml. The extension is optional:
when it cannot be compiled (no compiler, no Python headers) the install still succeeds and
pocketmq runs on its pure-Python reference implementations (pocketmq.protocol.native).
"""

from setuptools import Extension, setup

NATIVE = "src/pocketmq/_native"

setup(
    ext_modules=[
        Extension(
            "pocketmq._speedups",
            sources=[
                f"{NATIVE}/{name}.c"
                for name in (
                    "module",
                    "javahash",
                    "properties",
                    "records",
                    "batch",
                    "decode",
                    "index",
                    "dispatch",
                    "crc32",
                    "pull",
                    "msgid",
                    "held",
                    "frame",
                    "sendheader",
                    "putone",
                )
            ],
            depends=[f"{NATIVE}/speedups.h"],
            optional=True,
        )
    ]
)
