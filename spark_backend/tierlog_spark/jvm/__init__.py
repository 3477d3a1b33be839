"""The JVM reader: a Java DataSource V2 behind ``spark.read.format("tierlog")``."""
