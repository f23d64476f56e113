package org.localpriv.client;

/**
 * The privacy levels of one report of a mechanism, as a ledger records them
 * ({@link Mechanism#levels()}; docs/accounting.md).
 */
public final class Levels {
    /** The LDP level of one report, computed from the channel. */
    public final double epsilon;
    /** The level of the memoized randomization (memoized mechanisms), else null. */
    public final Double epsPerm;
    /** The level of one report given the memo, where the family has it, else null. */
    public final Double epsInst;
    /** {@code k} when a report is k-ary randomized response, else null. */
    public final Long rrValues;

    /**
     * @param epsilon the level of one report
     * @param epsPerm the memo's level, or null
     * @param epsInst the level given the memo, or null
     * @param rrValues k for k-ary randomized response, or null
     */
    public Levels(double epsilon, Double epsPerm, Double epsInst, Long rrValues) {
        this.epsilon = epsilon;
        this.epsPerm = epsPerm;
        this.epsInst = epsInst;
        this.rrValues = rrValues;
    }
}
