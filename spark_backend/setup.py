"""Builds the JVM reader's jar into the package when the distribution is built.

Metadata lives in pyproject.toml; this only adds a step to ``build_py``: compiling
``tierlog_spark/jvm/src`` with ``javac`` against pyspark's jars, into
``tierlog_spark/jvm/lib`` of the built package. Building needs a JDK and pyspark in the build
environment (``pip wheel --no-build-isolation`` in an environment that has pyspark, or a build
that installs it); without them the package is built without the jar, says so, and builds the
jar on first use where a JDK is (``tierlog_spark.session.jvm_reader_jar``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).parent
BUILD_MODULE = HERE / "tierlog_spark" / "jvm" / "build.py"


class BuildPyWithJar(build_py):
    """``build_py``, then the jar into the built package (not for editable installs)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # the source tree builds its jar on first use
        output = Path(self.build_lib) / "tierlog_spark" / "jvm" / "lib"
        jar, notice = _build_jar(output)
        if jar is None:
            print(f"tierlog-spark: {notice}", file=sys.stderr)
            return
        print(f"tierlog-spark: built {jar}")
        for other in output.glob("tierlog-spark-*.jar"):
            if other != jar:  # copied from a source tree's earlier builds
                other.unlink()


def _build_jar(output: Path) -> tuple[Path | None, str]:
    """Builds the jar into ``output``: its path, or None and a notice saying why not."""
    if importlib.util.find_spec("pyspark") is None:
        return None, (
            "pyspark is not in the build environment, so the JVM reader's jar is not built "
            "into the package; it is built on first use where a JDK is"
        )
    spec = importlib.util.spec_from_file_location("_tierlog_jar_build", BUILD_MODULE)
    assert spec is not None and spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    try:
        return Path(build.build_jar(output_dir=output)), ""
    except build.JarBuildError as err:
        return None, f"the JVM reader's jar is not built into the package: {err}"


setup(cmdclass={"build_py": BuildPyWithJar})
