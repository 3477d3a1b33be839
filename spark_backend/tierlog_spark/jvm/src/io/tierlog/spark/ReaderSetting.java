package io.tierlog.spark;

import java.util.Locale;
import org.apache.spark.sql.internal.SQLConf;

/**
 * Which reader a tierlog read uses, from the Spark conf {@value #KEY}: {@code auto} (the JVM
 * reader where the planner says it can read the options, else the Python one), {@code jvm}
 * (the JVM reader or an error saying why not) or {@code python}.
 */
enum ReaderSetting {
    AUTO,
    JVM,
    PYTHON;

    static final String KEY = "spark.tierlog.reader";

    /** The setting of the session planning the read. */
    static ReaderSetting current() {
        return parse(SQLConf.get().getConfString(KEY, "auto"));
    }

    static ReaderSetting parse(String value) {
        switch (value.trim().toLowerCase(Locale.ROOT)) {
            case "auto":
                return AUTO;
            case "jvm":
                return JVM;
            case "python":
                return PYTHON;
            default:
                throw new IllegalArgumentException(
                        KEY
                                + " is "
                                + TierlogSchema.pythonRepr(value)
                                + ", not one of auto, jvm, python");
        }
    }
}
