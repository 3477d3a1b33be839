"""``tierlog spark ...`` commands."""

from __future__ import annotations

import shutil

import click


@click.group("spark")
def spark_group() -> None:
    """Spark jobs over tiered data."""


@click.command("check")
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
def check_command(master: str) -> None:
    """Start Spark, run a small job through Python workers, and report the versions in use."""
    if shutil.which("java") is None:
        raise click.ClickException("no 'java' on PATH: Spark needs a JDK (17 or newer)")
    import pyspark

    from .session import make_session

    spark = make_session(master=master, app_name="tierlog-spark-check")
    try:
        total = spark.sparkContext.parallelize(range(1000), 2).map(lambda x: x * 2).sum()
        if total != 999000:
            raise click.ClickException(f"Spark returned a wrong answer: {total}")
        click.echo(f"pyspark {pyspark.__version__} on {master}: OK (Python workers ran)")
    finally:
        spark.stop()


spark_group.add_command(check_command)
