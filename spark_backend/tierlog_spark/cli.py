"""``tierlog spark ...`` commands."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click


@click.group("spark")
def spark_group() -> None:
    """Spark jobs over tiered data."""


@click.command("check")
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
@click.option(
    "--config",
    "config_file",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="A runtime's .properties or .toml file: also say which reader reads its data.",
)
@click.option("--topics", default=None, help="Comma-separated topics to check (default: any).")
def check_command(master: str, config_file: str | None, topics: str | None) -> None:
    """Start Spark, run a small job through Python workers, and report the versions in use,
    whether the JVM reader is there, and which reader reads the data of a runtime (--config)."""
    if shutil.which("java") is None:
        raise click.ClickException("no 'java' on PATH: Spark needs a JDK (17 or newer)")
    import pyspark

    from .jvm.bridge import installed
    from .jvm.build import find_javac
    from .session import jvm_reader_jar, make_session

    javac = find_javac()
    click.echo(f"JDK: {javac}" if javac else "JDK: none (no javac in JAVA_HOME/bin or on PATH)")
    jar = jvm_reader_jar()
    click.echo(
        f"JVM reader jar: {jar}" if jar else "JVM reader jar: none (it needs a JDK to build)"
    )
    spark = make_session(master=master, app_name="tierlog-spark-check")
    try:
        total = spark.sparkContext.parallelize(range(1000), 2).map(lambda x: x * 2).sum()
        if total != 999000:
            raise click.ClickException(f"Spark returned a wrong answer: {total}")
        click.echo(f"pyspark {pyspark.__version__} on {master}: OK (Python workers ran)")
        active = installed(spark)
        conf = spark.conf.get("spark.tierlog.reader", "auto")
    finally:
        spark.stop()
    if not active:
        click.echo("JVM reader: not installed; spark.read.format('tierlog') uses the Python reader")
        return
    click.echo(f"JVM reader: installed (spark.tierlog.reader = {conf})")
    if config_file is not None:
        reader, why = _reader_for(config_file, topics)
        click.echo(f"reader for {config_file}: {reader}: {why}")


def _reader_for(config_file: str, topics: str | None) -> tuple[str, str]:
    """The reader the JVM reader's planner chooses for a runtime's data, and why."""
    from tierlog.errors import TierlogError

    from .jvm.bridge import Planner
    from .options import ReadOptions

    options = {"config": config_file}
    if topics:
        options["topics"] = topics
    try:
        read = ReadOptions.from_options(options, need_topics=False)
        return Planner().reader_for(read)
    except (TierlogError, OSError) as err:
        raise click.ClickException(str(err)) from err


spark_group.add_command(check_command)


@contextmanager
def _spark(master: str, app_name: str) -> Iterator[Any]:
    """A session for one command, stopped after it unless it was already running here."""
    from pyspark.sql import SparkSession

    from .session import make_session

    running = SparkSession.getActiveSession()
    spark = make_session(master=master, app_name=app_name)
    try:
        yield spark
    finally:
        if running is None:
            spark.stop()


#: Options every job takes: the runtime's config file, and where Spark runs.
CONFIG_OPTION = click.option(
    "--config",
    "config_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="The runtime's .properties or .toml file.",
)
MASTER_OPTION = click.option(
    "--master", default="local[*]", show_default=True, help="Spark master URL."
)


def _names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise click.BadParameter("expected a comma-separated list of names")
    return names


@click.command("export")
@CONFIG_OPTION
@click.option("--topics", required=True, help="Comma-separated topics to export.")
@click.option("--output", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option("--log-dirs", help="Log dirs holding __remote_log_metadata (default: the config's).")
@click.option("--read-committed", is_flag=True, help="Leave out aborted transactions.")
@MASTER_OPTION
def export_command(
    config_file: str,
    topics: str,
    output: str,
    log_dirs: str | None,
    read_committed: bool,
    master: str,
) -> None:
    """Export what was tiered since the last run to Parquet, partitioned by topic/partition/date."""
    from .export import export

    extra = {}
    if log_dirs:
        extra["log.dirs"] = log_dirs
    if read_committed:
        extra["isolation.level"] = "read_committed"
    with _spark(master, "tierlog-spark-export") as spark:
        result = export(spark, config_file, _names(topics), output, extra_options=extra)
    if result.empty:
        click.echo("nothing new to export")
        return
    for (topic, partition), (start, end) in sorted(result.ranges.items()):
        click.echo(f"{topic}-{partition}: offsets {start}..{end - 1}")
    click.echo(f"exported {result.rows} records in {len(result.files)} files to {output}")


spark_group.add_command(export_command)


@click.command("verify")
@CONFIG_OPTION
@click.option("--topics", help="Comma-separated topics to check (default: every topic).")
@click.option("--delete-orphans", is_flag=True, help="Delete the orphan objects found.")
@click.option("--report", type=click.Path(dir_okay=False), help="Also write the report as JSON.")
@click.option(
    "--grace-ms",
    type=click.IntRange(min=0),
    default=3_600_000,
    show_default=True,
    help="Uploads and deletions younger than this are taken to be under way, not orphans.",
)
@click.option("--log-dirs", help="Log dirs holding __remote_log_metadata (default: the config's).")
@MASTER_OPTION
def verify_command(
    config_file: str,
    topics: str | None,
    delete_orphans: bool,
    report: str | None,
    grace_ms: int,
    log_dirs: str | None,
    master: str,
) -> None:
    """Check remote storage against the metadata: finished segments present and CRC-valid, and
    no orphan objects. Exits with 1 when something is wrong."""
    from .verify import verify

    extra = {"log.dirs": log_dirs} if log_dirs else {}
    with _spark(master, "tierlog-spark-verify") as spark:
        result = verify(
            spark,
            config_file,
            topics=_names(topics) if topics else None,
            grace_ms=grace_ms,
            delete_orphans=delete_orphans,
            extra_options=extra,
        )
    _print_report(result)
    if report:
        result.write(report)
        click.echo(f"report written to {report}")
    if not result.clean:
        raise SystemExit(1)


def _print_report(report: Any) -> None:
    click.echo(f"checked {report.checked_segments} finished segments")
    if report.problems:
        click.echo(f"\n{'segment':<44} {'offsets':<21} problem")
        for problem in report.problems:
            where = f"{problem.topic}-{problem.partition} {problem.segment_id}"
            offsets = f"{problem.start_offset}..{problem.end_offset}"
            at = "" if problem.position is None else f" at byte {problem.position}"
            click.echo(f"{where:<44} {offsets:<21} {problem.problem}{at}")
    if report.orphans:
        click.echo(f"\n{'orphan upload':<44} {'objects':>7}  reason")
        for orphan in report.orphans:
            where = f"{orphan.topic}-{orphan.partition} {orphan.segment_id}"
            state = " (deleted)" if orphan.deleted else ""
            click.echo(f"{where:<44} {len(orphan.objects):>7}  {orphan.reason}{state}")
    if report.orphans_not_listed:
        click.echo(f"orphans not looked for: {report.orphans_not_listed}")
    problems, orphans = len(report.problems), sum(not o.deleted for o in report.orphans)
    click.echo(f"\n{problems} bad segments, {orphans} orphan uploads left")


spark_group.add_command(verify_command)


@click.command("tier")
@click.option(
    "--config",
    "config_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The runtime's .properties or .toml file.",
)
@click.option("--topics", required=True, help="Comma-separated topics whose backlog to tier.")
@click.option(
    "--brokers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Number of brokers in the embedded cluster, as given to 'tierlog run'.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="The cluster's data dir, as given to 'tierlog run' [default: the first of log.dirs].",
)
@click.option(
    "--ready-timeout-ms",
    type=click.IntRange(min=0),
    default=120_000,
    show_default=True,
    help="How long to wait for the brokers to lead every partition with metadata ready "
    "(attached to a cluster: for each partition's copy slot).",
)
@MASTER_OPTION
def tier_command(
    config_file: Path,
    topics: str,
    brokers: int,
    data_dir: Path | None,
    ready_timeout_ms: int,
    master: str,
) -> None:
    """Tier every eligible rolled segment of the topics in parallel, then stop.

    With a cluster node's config (one with zookeeper.connect), the job attaches to the running
    cluster: run it on that broker's machine, with read access to its log dirs; it tiers the
    partitions that broker leads while the broker keeps running. Otherwise the job runs inside
    the runtime: this starts the embedded cluster as 'tierlog run' does (so run it instead of,
    not beside, 'tierlog run' on the same data) and shuts it down cleanly afterwards. Exits
    with 1 when a partition could not be tiered in full.
    """
    from tierlog.cluster import EmbeddedCluster
    from tierlog.config import BrokerConfig, load_sources

    from .tier import TierError, tier, tier_attached, wait_ready

    names = _names(topics)
    raw = load_sources(config_file, os.environ)
    config = BrokerConfig.from_mapping(raw)
    if config.get_str("zookeeper.connect"):
        with _spark(master, "tierlog-spark-tier") as spark:
            try:
                result = tier_attached(
                    spark, config_file, names, slot_timeout_s=ready_timeout_ms / 1000
                )
            except (TierError, ValueError) as err:
                raise click.ClickException(str(err)) from err
    else:
        if data_dir is None:
            data_dir = Path(config.get_list("log.dirs")[0])
        with EmbeddedCluster(brokers, data_dir, raw) as cluster:
            wait_ready(cluster, names, ready_timeout_ms / 1000)
            with _spark(master, "tierlog-spark-tier") as spark:
                result = tier(spark, [cluster.broker(n) for n in cluster.broker_ids], names)
    for tip, segments in sorted(result.tiered.items(), key=lambda item: str(item[0])):
        if segments:
            offsets = f"{segments[0].start_offset}..{segments[-1].end_offset}"
            click.echo(f"{tip.topic_partition}: {len(segments)} segments, offsets {offsets}")
    for tip, error in sorted(result.failed.items(), key=lambda item: str(item[0])):
        click.echo(f"{tip.topic_partition}: stopped: {error}", err=True)
    click.echo(f"tiered {result.segments} segments")
    if result.failed:
        raise SystemExit(1)


spark_group.add_command(tier_command)
