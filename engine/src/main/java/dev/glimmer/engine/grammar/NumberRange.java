package dev.glimmer.engine.grammar;

import static dev.glimmer.engine.grammar.Expr.alt;
import static dev.glimmer.engine.grammar.Expr.byteClass;
import static dev.glimmer.engine.grammar.Expr.empty;
import static dev.glimmer.engine.grammar.Expr.literal;
import static dev.glimmer.engine.grammar.Expr.repeat;
import static dev.glimmer.engine.grammar.Expr.seq;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The JSON numbers between two decimal bounds, exactly: written without an exponent, an integer part
 * and at most {@value #FRACTION_DIGITS} fraction digits. The integer parts strictly inside the bounds
 * take any fraction; at a bound's integer part the fraction digits are compared with the bound's,
 * digit by digit, which is a small grammar. Negative numbers are a minus sign before the magnitudes
 * of the negative part of the range.
 */
final class NumberRange {
    static final int FRACTION_DIGITS = 15;
    private static final Expr DIGIT = Expr.byteRanges('0', '9');

    private NumberRange() {}

    /** The numbers from {@code min} to {@code max}; null when there are none. */
    static Expr of(BigDecimal min, boolean minInclusive, BigDecimal max, boolean maxInclusive) {
        List<Expr> parts = new ArrayList<>();
        if (max.signum() >= 0) {
            boolean fromZero = min.signum() < 0;
            add(parts, magnitudes(fromZero ? BigDecimal.ZERO : min, fromZero || minInclusive, max, maxInclusive));
        }
        if (min.signum() < 0) {
            // x in [min, max] and x < 0: its magnitude -x in (0, -min], and at least -max when max < 0.
            boolean belowZero = max.signum() < 0;
            Expr negative = magnitudes(
                    belowZero ? max.negate() : BigDecimal.ZERO, belowZero && maxInclusive, min.negate(), minInclusive);
            if (negative != null) {
                parts.add(seq(literal("-"), negative));
            }
        }
        return parts.isEmpty() ? null : alt(parts);
    }

    private static void add(List<Expr> parts, Expr e) {
        if (e != null) {
            parts.add(e);
        }
    }

    /** Non-negative numbers from {@code a} to {@code b}; null when none. */
    private static Expr magnitudes(BigDecimal a, boolean aInclusive, BigDecimal b, boolean bInclusive) {
        int order = a.compareTo(b);
        if (order > 0 || order == 0 && !(aInclusive && bInclusive)) {
            return null;
        }
        BigInteger ia = a.toBigInteger();
        BigInteger ib = b.toBigInteger();
        String fa = fractionDigits(a);
        String fb = fractionDigits(b);
        if (ia.equals(ib)) {
            return withFraction(ia, fraction(fa, aInclusive, fb, bInclusive));
        }
        List<Expr> parts = new ArrayList<>();
        add(parts, withFraction(ia, fraction(fa, aInclusive, null, false)));
        if (ib.subtract(ia).compareTo(BigInteger.TWO) >= 0) {
            parts.add(seq(
                    Expr.integerRange(ia.longValueExact() + 1, ib.longValueExact() - 1),
                    fraction(null, false, null, false)));
        }
        add(parts, withFraction(ib, fraction(null, false, fb, bInclusive)));
        return parts.isEmpty() ? null : alt(parts);
    }

    private static Expr withFraction(BigInteger integerPart, Expr fraction) {
        return fraction == null ? null : seq(literal(integerPart.toString()), fraction);
    }

    /** The digits after the point of a non-negative decimal, without trailing zeros ("" for an integer). */
    private static String fractionDigits(BigDecimal v) {
        BigDecimal f = v.subtract(new BigDecimal(v.toBigInteger()));
        if (f.signum() == 0) {
            return "";
        }
        String plain = f.stripTrailingZeros().toPlainString();
        return plain.substring(plain.indexOf('.') + 1);
    }

    /**
     * Nothing, or a point and 1 to {@value #FRACTION_DIGITS} digits, whose value is at least (above when not
     * inclusive) 0.{@code low} and at most (below) 0.{@code high}; a null bound is no bound. Null when nothing fits.
     */
    private static Expr fraction(String low, boolean lowInclusive, String high, boolean highInclusive) {
        List<Expr> choices = new ArrayList<>();
        if (endsHere(low, lowInclusive, high, highInclusive)) {
            choices.add(empty());
        }
        Expr digits = digits(low, lowInclusive, high, highInclusive, FRACTION_DIGITS);
        if (digits != null) {
            choices.add(seq(literal("."), digits));
        }
        return choices.isEmpty() ? null : alt(choices);
    }

    /**
     * Whether the digits may stop here: the bounds' digits still to compare are {@code low} and {@code high}
     * (empty: the digits so far equal the bound; the bounds have no trailing zeros, so a non-empty rest is above zero).
     */
    private static boolean endsHere(String low, boolean lowInclusive, String high, boolean highInclusive) {
        boolean aboveLow = low == null || low.isEmpty() && lowInclusive;
        boolean belowHigh = high == null || !high.isEmpty() || highInclusive;
        return aboveLow && belowHigh;
    }

    /** 1 to {@code room} digits within the bounds' rests (see {@link #endsHere}); null when none fit. */
    private static Expr digits(String low, boolean lowInclusive, String high, boolean highInclusive, int room) {
        if (room == 0) {
            return null;
        }
        if (low == null && high == null) {
            return repeat(DIGIT, 1, room);
        }
        // Digits that leave the same rests behind go together: below, at and above each bound's next digit.
        record Rests(String low, String high) {}
        Map<Rests, boolean[]> groups = new LinkedHashMap<>();
        for (char d = '0'; d <= '9'; d++) {
            String restLow = null;
            if (low != null) {
                // An exhausted bound goes on as zeros.
                char next = low.isEmpty() ? '0' : low.charAt(0);
                if (d < next) {
                    continue;
                }
                restLow = d > next ? null : low.isEmpty() ? "" : low.substring(1);
            }
            String restHigh = null;
            if (high != null) {
                char next = high.isEmpty() ? '0' : high.charAt(0);
                if (d > next) {
                    continue;
                }
                restHigh = d < next ? null : high.isEmpty() ? "" : high.substring(1);
            }
            groups.computeIfAbsent(new Rests(restLow, restHigh), k -> new boolean[256])[d] = true;
        }
        List<Expr> choices = new ArrayList<>();
        for (Map.Entry<Rests, boolean[]> g : groups.entrySet()) {
            Rests r = g.getKey();
            List<Expr> after = new ArrayList<>();
            if (endsHere(r.low(), lowInclusive, r.high(), highInclusive)) {
                after.add(empty());
            }
            Expr more = digits(r.low(), lowInclusive, r.high(), highInclusive, room - 1);
            if (more != null) {
                after.add(more);
            }
            if (!after.isEmpty()) {
                choices.add(seq(byteClass(g.getValue()), alt(after)));
            }
        }
        return choices.isEmpty() ? null : alt(choices);
    }
}
