package io.groupfit.kafka.core;

import java.math.BigInteger;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * An algorithm the core runs, with its parameters checked: the names and parameters of groupfit's registry
 * ({@code GET /v1/algorithms}) for the algorithms implemented here. {@link #solve} gives the same {@link Outcome} as
 * {@code app.core.assign.solve} on the same problem.
 */
public final class Algorithm {
    private enum Kind {
        ANY_FIT, MODIFIED_ANY_FIT, LEAST_LOADED
    }

    private record Spec(Kind kind, Bins.Rule rule, boolean flag) {}

    private static final Map<String, Spec> SPECS = new LinkedHashMap<>();

    static {
        SPECS.put("nf", new Spec(Kind.ANY_FIT, Bins.Rule.NEXT, false));
        SPECS.put("nfd", new Spec(Kind.ANY_FIT, Bins.Rule.NEXT, true));
        SPECS.put("bf", new Spec(Kind.ANY_FIT, Bins.Rule.BEST, false));
        SPECS.put("bfd", new Spec(Kind.ANY_FIT, Bins.Rule.BEST, true));
        SPECS.put("wf", new Spec(Kind.ANY_FIT, Bins.Rule.WORST, false));
        SPECS.put("wfd", new Spec(Kind.ANY_FIT, Bins.Rule.WORST, true));
        // Table II: the fit rule, and whether consumers are visited by cumulative rate (else by largest partition)
        SPECS.put("mwf", new Spec(Kind.MODIFIED_ANY_FIT, Bins.Rule.WORST, true));
        SPECS.put("mbf", new Spec(Kind.MODIFIED_ANY_FIT, Bins.Rule.BEST, true));
        SPECS.put("mwfp", new Spec(Kind.MODIFIED_ANY_FIT, Bins.Rule.WORST, false));
        SPECS.put("mbfp", new Spec(Kind.MODIFIED_ANY_FIT, Bins.Rule.BEST, false));
        SPECS.put("least-loaded", new Spec(Kind.LEAST_LOADED, null, false));
    }

    /** The algorithms this core runs. */
    public static final Set<String> NAMES = new TreeSet<>(SPECS.keySet());

    private final String name;
    private final Spec spec;
    private final Double maxRscore;
    /** As given (a Long, or a BigInteger beyond 2^63: echoed as it came, as the service does). */
    private final Number maxMoves;
    private final LeastLoaded.Params leastLoaded;

    private Algorithm(String name, Spec spec, Double maxRscore, Number maxMoves, LeastLoaded.Params leastLoaded) {
        this.name = name;
        this.spec = spec;
        this.maxRscore = maxRscore;
        this.maxMoves = maxMoves;
        this.leastLoaded = leastLoaded;
    }

    public static boolean runs(String name) {
        return SPECS.containsKey(name);
    }

    /** The algorithm of this name with these parameters (as the service's {@code params}); throws when either is
     * not one the core knows or a parameter is out of range. */
    public static Algorithm of(String name, Map<String, Object> params) {
        Spec spec = SPECS.get(name);
        if (spec == null) {
            throw new IllegalArgumentException("the local core does not run algorithm '" + name + "'; it runs " + NAMES);
        }
        Map<String, Object> given = params == null ? Map.of() : params;
        Set<String> allowed = switch (spec.kind()) {
            case ANY_FIT -> Set.of();
            case MODIFIED_ANY_FIT -> Set.of("max_rscore", "max_moves");
            case LEAST_LOADED -> Set.of("mu", "w_sla", "f_up", "f_down", "rebalance_s", "plan_rebalance_lag");
        };
        for (String key : given.keySet()) {
            require(allowed.contains(key), "algorithm '" + name + "' has no parameter '" + key + "'");
        }
        Double maxRscore = null;
        Number maxMoves = null;
        LeastLoaded.Params leastLoaded = null;
        if (spec.kind() == Kind.MODIFIED_ANY_FIT) {
            maxRscore = number(given, "max_rscore", null);
            require(maxRscore == null || maxRscore >= 0, "max_rscore must be at least 0");
            Object moves = given.get("max_moves");
            if (moves != null) {
                require(moves instanceof Integer || moves instanceof Long || moves instanceof BigInteger,
                        "max_moves must be an integer");
                maxMoves = moves instanceof Integer small ? Long.valueOf(small) : (Number) moves;
                require(!(maxMoves instanceof BigInteger big ? big.signum() < 0 : maxMoves.longValue() < 0),
                        "max_moves must be at least 0");
            }
        } else if (spec.kind() == Kind.LEAST_LOADED) {
            leastLoaded = LeastLoaded.Params.of(given);
        }
        return new Algorithm(name, spec, maxRscore, maxMoves, leastLoaded);
    }

    public String name() {
        return name;
    }

    /** The parameters as the service takes them (what was given, defaults left out). */
    public Map<String, Object> params() {
        Map<String, Object> params = new LinkedHashMap<>();
        if (maxRscore != null) {
            params.put("max_rscore", maxRscore);
        }
        if (maxMoves != null) {
            params.put("max_moves", maxMoves);
        }
        if (leastLoaded != null) {
            if (leastLoaded.mu() != null) {
                params.put("mu", leastLoaded.mu());
            }
            params.put("w_sla", leastLoaded.wSla());
            params.put("f_up", leastLoaded.fUp());
            params.put("f_down", leastLoaded.fDown());
            params.put("rebalance_s", leastLoaded.rebalanceS());
            params.put("plan_rebalance_lag", leastLoaded.planRebalanceLag());
        }
        return params;
    }

    public Outcome solve(Problem problem) {
        Placement placement = switch (spec.kind()) {
            case ANY_FIT -> AnyFit.place(problem, spec.rule(), spec.flag());
            case MODIFIED_ANY_FIT -> ModifiedAnyFit.place(problem, spec.rule(), spec.flag(), maxRscore, maxMoves);
            case LEAST_LOADED -> LeastLoaded.place(problem, leastLoaded);
        };
        return Outcome.of(name, problem, placement);
    }

    static Double number(Map<String, Object> params, String key, Double otherwise) {
        Object value = params.get(key);
        if (value == null) {
            return otherwise;
        }
        require(value instanceof Number && !(value instanceof Boolean), "parameter '" + key + "' must be a number");
        double number = ((Number) value).doubleValue();
        require(Double.isFinite(number), "parameter '" + key + "' must be finite");
        return number;
    }

    static void require(boolean condition, String message) {
        if (!condition) {
            throw new IllegalArgumentException(message);
        }
    }
}
