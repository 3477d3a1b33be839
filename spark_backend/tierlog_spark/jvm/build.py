"""Building the JVM reader's jar with ``javac`` against the jars pyspark ships.

The Java sources travel inside the package (``jvm/src``, ``jvm/resources``), so a jar can be
built wherever a JDK is: when the distribution is built, or on first use. A jar's name carries a
digest of its sources and of the pyspark version it was compiled against, so a changed source
or an upgraded pyspark builds a new one instead of loading a stale one.

``python -m tierlog_spark.jvm.build`` builds it and prints its path.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

__all__ = ["JarBuildError", "build_jar", "find_javac", "jar_path", "pyspark_jars_dir"]

HERE = Path(__file__).parent
SOURCES = HERE / "src"
RESOURCES = HERE / "resources"
#: Where a built jar goes when the package directory cannot be written to.
USER_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tierlog-spark"
#: The Java release the jar targets: the oldest JDK Spark 4 runs on.
JAVA_RELEASE = "17"


class JarBuildError(RuntimeError):
    """The jar could not be built; the message says why (no JDK, a compile error...)."""


def pyspark_jars_dir() -> Path:
    """The directory of the jars pyspark ships (Spark's own classpath)."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def find_javac() -> str | None:
    """``javac`` from ``JAVA_HOME``, else from ``PATH``; None without a JDK."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "javac"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("javac")


def _inputs() -> list[Path]:
    return sorted(p for root in (SOURCES, RESOURCES) for p in root.rglob("*") if p.is_file())


def source_digest() -> str:
    """A digest of every source and resource file and of the pyspark version."""
    import pyspark

    digest = hashlib.sha256(pyspark.__version__.encode())
    for path in _inputs():
        digest.update(str(path.relative_to(HERE)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def jar_path() -> Path | None:
    """The jar built from the current sources, if one exists (packaged or cached)."""
    name = f"tierlog-spark-{source_digest()}.jar"
    for directory in (HERE / "lib", USER_CACHE):
        if (directory / name).is_file():
            return directory / name
    return None


def build_jar(output_dir: Path | None = None) -> Path:
    """The jar for the current sources, compiled now unless it already exists.

    Raises JarBuildError naming what is missing or what failed to compile.
    """
    existing = jar_path()
    if existing is not None and output_dir is None:
        return existing
    javac = find_javac()
    if javac is None:
        raise JarBuildError(
            "no JDK: javac is neither in JAVA_HOME/bin nor on PATH (a JRE runs Spark but "
            "cannot build the tierlog JVM reader; install a JDK 17+)"
        )
    sources = sorted(str(p) for p in SOURCES.rglob("*.java"))
    if not sources:
        raise JarBuildError(f"no Java sources under {SOURCES}")
    name = f"tierlog-spark-{source_digest()}.jar"
    targets = [output_dir] if output_dir is not None else [HERE / "lib", USER_CACHE]
    with tempfile.TemporaryDirectory(prefix="tierlog-jar-") as scratch:
        classes = Path(scratch) / "classes"
        classes.mkdir()
        command = [
            javac,
            "--release",
            JAVA_RELEASE,
            "-nowarn",
            "-encoding",
            "UTF-8",
            "-cp",
            str(pyspark_jars_dir() / "*"),
            "-d",
            str(classes),
            *sources,
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise JarBuildError(f"javac failed:\n{done.stderr.strip() or done.stdout.strip()}")
        built = Path(scratch) / name
        with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for root in (classes, RESOURCES):
                for path in sorted(root.rglob("*")):
                    if path.is_file():
                        jar.write(path, str(path.relative_to(root)))
        return _place(built, targets)


def _place(built: Path, targets: list[Path]) -> Path:
    """``built`` moved into the first writable target directory, atomically."""
    failures = []
    for directory in targets:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            staged = directory / f".{built.name}.{os.getpid()}"
            shutil.copyfile(built, staged)
            os.replace(staged, directory / built.name)
            return directory / built.name
        except OSError as error:
            failures.append(f"{directory}: {error}")
    raise JarBuildError("nowhere to put the jar: " + "; ".join(failures))


def main() -> int:
    try:
        print(build_jar())
    except JarBuildError as error:
        print(f"tierlog-spark: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
