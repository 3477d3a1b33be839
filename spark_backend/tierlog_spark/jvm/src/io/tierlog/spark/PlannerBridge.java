package io.tierlog.spark;

import java.util.concurrent.atomic.AtomicReference;

/**
 * Where the driver's Python process leaves its {@link Planner} for the JVM reader to find. One
 * per JVM: the planner serves every session of the Python driver that installed it. Without one
 * (Spark Connect, a Scala or Java session) reads go through the Python data source.
 */
public final class PlannerBridge {
    private static final AtomicReference<Planner> PLANNER = new AtomicReference<>();

    private PlannerBridge() {}

    /** Makes {@code planner} the one reads ask, replacing any installed before. */
    public static void install(Planner planner) {
        if (planner == null) {
            throw new IllegalArgumentException("cannot install a null tierlog planner");
        }
        PLANNER.set(planner);
    }

    /** Forgets the installed planner, if any (its Python process is going away). */
    public static void uninstall() {
        PLANNER.set(null);
    }

    public static boolean installed() {
        return PLANNER.get() != null;
    }

    /** The installed planner; an error saying how to install one if there is none. */
    public static Planner planner() {
        Planner planner = PLANNER.get();
        if (planner == null) {
            throw new IllegalStateException(
                    "no tierlog planner is installed in this JVM: call tierlog_spark.register(spark)"
                            + " from the Python driver first");
        }
        return planner;
    }
}
