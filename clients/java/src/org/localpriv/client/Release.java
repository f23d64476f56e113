package org.localpriv.client;

import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;

/**
 * Reports one device sent under one mechanism: one entry of the privacy ledger
 * (docs/accounting.md, "The ledger file"). Checked on construction, as the Python reference checks
 * its {@code Release}.
 */
public final class Release {
    /** Most reports one release records. */
    public static final long MAX_REPORTS = 1_000_000_000L;
    /** The keys of a release, in the order of the file. */
    public static final List<String> KEYS = Collections.unmodifiableList(Arrays.asList("spec", "epsilon", "delta", "reports",
            "collection", "time", "memo_key", "eps_perm", "eps_inst", "rr_values"));

    /** The mechanism's canonical spec. */
    public final String spec;
    /** The LDP level of ONE report, computed from the channel ({@code >= 0}, may be infinite). */
    public final double epsilon;
    /** The {@code delta} of one report, in {@code [0, 1)}. */
    public final double delta;
    /** How many reports, {@code 1..10^9}. */
    public final long reports;
    /** Where they went. */
    public final String collection;
    /** When, ISO 8601 in UTC to the second. */
    public final String time;
    /** The stored memo the reports were drawn from, or null for independent reports. */
    public final String memoKey;
    /** The level of the memoized randomization (required with a memo key), or null. */
    public final Double epsPerm;
    /** The level of one report given the memo, or null. */
    public final Double epsInst;
    /** {@code k} when a report is k-ary randomized response, or null. */
    public final Long rrValues;

    /**
     * A checked release.
     *
     * @throws LedgerException (one line) on a value out of its range
     */
    public Release(String spec, double epsilon, double delta, long reports, String collection, String time, String memoKey,
                   Double epsPerm, Double epsInst, Long rrValues) {
        if (spec == null || spec.isEmpty()) {
            throw new LedgerException("release: spec must be a non-empty string");
        }
        level(epsilon, "epsilon", true);
        level(delta, "delta", false);
        if (delta >= 1) {
            throw new LedgerException("release: delta must be in [0, 1), got " + Json.pyFloat(delta));
        }
        if (reports < 1 || reports > MAX_REPORTS) {
            throw new LedgerException("release: reports must be an integer in 1.." + MAX_REPORTS + ", got " + reports);
        }
        if (collection == null || time == null) {
            throw new LedgerException("release: " + (collection == null ? "collection" : "time") + " must be a string");
        }
        if (memoKey != null) {
            if (memoKey.isEmpty()) {
                throw new LedgerException("release: memo_key must be a non-empty string or null");
            }
            if (epsPerm == null) {
                throw new LedgerException("release: a memo_key needs eps_perm, the level of the memoized randomization");
            }
        }
        if (epsPerm != null) {
            level(epsPerm, "eps_perm", true);
        }
        if (epsInst != null) {
            level(epsInst, "eps_inst", true);
        }
        if (rrValues != null && rrValues < 2) {
            throw new LedgerException("release: rr_values must be an integer >= 2 or null, got " + rrValues);
        }
        this.spec = spec;
        this.epsilon = epsilon;
        this.delta = delta;
        this.reports = reports;
        this.collection = collection;
        this.time = time;
        this.memoKey = memoKey;
        this.epsPerm = epsPerm;
        this.epsInst = epsInst;
        this.rrValues = rrValues;
    }

    /** {@code reports} independent reports at {@code epsilon} (the other keys at their defaults). */
    public Release(String spec, double epsilon, long reports) {
        this(spec, epsilon, 0.0, reports, "", "", null, null, null, null);
    }

    private static void level(double v, String name, boolean allowInf) {
        if (Double.isNaN(v) || v < 0 || (!allowInf && Double.isInfinite(v))) {
            throw new LedgerException("release: " + name + " must be >= 0" + (allowInf ? "" : " and finite") + ", got "
                    + Json.pyFloat(v));
        }
    }

    /**
     * The release of {@code reports} reports of {@code mech}, its levels computed here
     * ({@link Mechanism#levels()}); give {@code memoKey} when they are drawn from a stored memo.
     */
    public static Release of(Mechanism mech, long reports, String collection, String time, String memoKey) {
        Levels lv = mech.levels();
        if (memoKey != null && lv.epsPerm == null) {
            throw new LedgerException("release: " + mech.canonical + " has no memoized randomization, so no memo_key");
        }
        return new Release(mech.canonical, lv.epsilon, 0.0, reports, collection, time, memoKey, lv.epsPerm, lv.epsInst, lv.rrValues);
    }

    /** The same release with another memo key. */
    Release withMemoKey(String key) {
        return new Release(spec, epsilon, delta, reports, collection, time, key, epsPerm, epsInst, rrValues);
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof Release)) {
            return false;
        }
        Release r = (Release) o;
        return spec.equals(r.spec) && Double.compare(epsilon, r.epsilon) == 0 && Double.compare(delta, r.delta) == 0
                && reports == r.reports && collection.equals(r.collection) && time.equals(r.time)
                && Objects.equals(memoKey, r.memoKey) && Objects.equals(epsPerm, r.epsPerm)
                && Objects.equals(epsInst, r.epsInst) && Objects.equals(rrValues, r.rrValues);
    }

    @Override
    public int hashCode() {
        return Objects.hash(spec, epsilon, reports, memoKey);
    }
}
